"""Run by tests/methods/test_distgnn_mb.py under ``mpiexec -n P``: DistGNN-MB's mini-batch
training as ``supergcn train`` runs it, with the runs of ``distgnn_mb_common.RUNS[P]``, each
from the workspace's initial weights of its model and writing its metrics beside the inputs.

Usage: ``distgnn_mb_job.py WORKSPACE``.
"""

import sys
from pathlib import Path

from mpi4py import MPI

from supergcn.distributed.ranks import run_ranked
from supergcn.train.config import TrainConfig
from supergcn.train.trainer import train

from distgnn_mb_common import BATCH, EPOCHS, FANOUTS, HIDDEN, LAYERS, LR, RUNS, SEED

comm = MPI.COMM_WORLD
root, parts = Path(sys.argv[1]), comm.Get_size()
for name, options in RUNS[parts].items():
    config = TrainConfig(graph=root / "g", partition=root / f"p{parts}", plan=root / f"p{parts}hybrid",
                         out=root / f"P{parts}-{name}.jsonl", hidden=HIDDEN, num_layers=LAYERS, dropout=0.0,
                         epochs=EPOCHS, lr=LR, seed=SEED, init_weights=root / f"init-{options['model']}.pt",
                         batch_size=BATCH, fanouts=FANOUTS, **options)
    if run_ranked(lambda c: train(config, c), comm, "train") != 0:
        sys.exit(1)
print(f"rank {comm.Get_rank()} ok", flush=True)
