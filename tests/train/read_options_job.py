"""Run by tests/train/test_read_options.py under ``mpiexec -n 2``: short runs of SuperGCN's
exchange and of every compared method, each with a TrainConfig that records which of its
options the training code reads (the option checks and serialisations that read every
option, in supergcn/train/config.py, conflicts.py and options.py, left out); rank 0 writes
them to ``read.json`` in the output folder: scenario -> the options read (a file, since the
ranks' printed lines may interleave mid-line)."""

import json
import sys
from pathlib import Path

from mpi4py import MPI

import supergcn
from supergcn.methods import method_cards
from supergcn.train.config import TrainConfig
from supergcn.train.trainer import train

PACKAGE = str(Path(supergcn.__file__).parent)
#: Readers of every option at once: checks and serialisations, not the training.
NOT_TRAINING = {"conflicts", "as_json", "values", "trajectory_fingerprint", "check_outputs"}
OWN_FILES = {str(Path(PACKAGE) / "train" / name) for name in ("conflicts.py",)} | {str(Path(PACKAGE) / "options.py")}
FIELDS = set(TrainConfig.__dataclass_fields__)


class Recording(TrainConfig):
    """A run's options that remember which of them the code reads."""

    def __getattribute__(self, name):
        if name in FIELDS:
            frame = sys._getframe(1)
            while frame.f_code.co_name.startswith("<"):  # a comprehension reads for the function around it
                frame = frame.f_back
            path = frame.f_code.co_filename
            if path.startswith(PACKAGE) and path not in OWN_FILES and frame.f_code.co_name not in NOT_TRAINING:
                object.__getattribute__(self, "__dict__").setdefault("_read", set()).add(name)
        return object.__getattribute__(self, name)


steps, out = Path(sys.argv[1]), Path(sys.argv[2])
common = {"graph": steps / "graph", "partition": steps / "partition", "epochs": 2, "hidden": 8, "grad_clip": 1.0}
scenarios = {"supergcn": {"strategy": "hybrid"},
             "supergcn-int2-lp": {"strategy": "hybrid", "bits": 2, "label_rate": 0.5, "label_draw": "bernoulli",
                                  "rounding": "stochastic"},
             "supergcn-gat": {"strategy": "hybrid", "model": "gat", "heads": 2, "attention_dropout": 0.1},
             **{method.name: {"strategy": method.strategies[-1], **method.example} for method in method_cards()}}
scenarios["distgnn_mb"].update(fanouts="2,2,2", batch_size=100)  # several steps an epoch: pushes
read = {}
for name, options in scenarios.items():
    strategy = options.pop("strategy")
    config = Recording(**common, plan=steps / strategy, out=out / f"{name}.jsonl", **options)
    train(config, MPI.COMM_WORLD)
    read[name] = sorted(config.__dict__.get("_read", ()))
if MPI.COMM_WORLD.Get_rank() == 0:
    (out / "read.json").write_text(json.dumps(read))
print(f"rank {MPI.COMM_WORLD.Get_rank()} ok", flush=True)
