"""Run by tests/methods/test_sar.py under ``mpiexec -n P``: the trainer, as ``supergcn
train`` runs it, for every run of ``sar_common.runs()`` (the one-shot exchange and SAR's
two modes, each model, a post and a hybrid plan), each writing its metrics and final
log-probabilities into the workspace.

Usage: ``sar_job.py WORKSPACE``; the workspace holds the graph (``g``), the partition into
P parts (``pP``), its plans (``pP-<strategy>``) and the initial weights (``init_<model>.pt``).
"""

import sys
from pathlib import Path

from mpi4py import MPI

from supergcn.distributed.ranks import run_ranked
from supergcn.train.config import TrainConfig
from supergcn.train.trainer import train

from sar_common import EPOCHS, HIDDEN, LR, runs

comm = MPI.COMM_WORLD
root, parts = Path(sys.argv[1]), comm.Get_size()
for name, options in runs().items():
    options = dict(options)
    strategy = options.pop("strategy")
    config = TrainConfig(graph=root / "g", partition=root / f"p{parts}", plan=root / f"p{parts}-{strategy}",
                         out=root / f"P{parts}-{name}.jsonl", save_logits=root / f"P{parts}-{name}.npy",
                         hidden=HIDDEN, dropout=0.0, epochs=EPOCHS, lr=LR,
                         init_weights=root / f"init_{options['model']}.pt", **options)
    if run_ranked(lambda c: train(config, c), comm, "train") != 0:
        sys.exit(1)
print(f"rank {comm.Get_rank()} ok", flush=True)
