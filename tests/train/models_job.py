"""Run by tests/train/test_models.py under ``mpiexec -n P``: the trainer, as ``supergcn
train`` runs it, for the runs of ``models_common.runs(P)``, each writing its metrics and
final log-probabilities beside the workspace's inputs.

Usage: ``models_job.py WORKSPACE``; the workspace holds the graph (``g``), the partition
into P parts (``pP``), its plans (``pP<strategy>``) and the initial weights (``init_<model>.pt``).
"""

import sys
from pathlib import Path

from mpi4py import MPI

from supergcn.distributed.ranks import run_ranked
from supergcn.train.config import TrainConfig
from supergcn.train.trainer import train

from models_common import EPOCHS, HEADS, HIDDEN, LAYERS, LR, runs

comm = MPI.COMM_WORLD
root, parts = Path(sys.argv[1]), comm.Get_size()
for name, options in runs(parts).items():
    options = dict(options)
    strategy = options.pop("strategy")
    config = TrainConfig(graph=root / "g", partition=root / f"p{parts}", plan=root / f"p{parts}{strategy}",
                         out=root / f"P{parts}-{name}.jsonl", save_logits=root / f"P{parts}-{name}.npy",
                         hidden=HIDDEN, num_layers=LAYERS, heads=HEADS, dropout=0.0, epochs=EPOCHS, lr=LR,
                         init_weights=root / f"init_{options['model']}.pt", **options)
    if run_ranked(lambda c: train(config, c), comm, "train") != 0:
        sys.exit(1)
print(f"rank {comm.Get_rank()} ok", flush=True)
