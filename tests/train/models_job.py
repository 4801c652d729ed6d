"""Run by tests/train/test_models.py under ``mpiexec -n P``: the trainer, as ``supergcn
train`` runs it, for the runs of ``models_common.RUNS``, each writing its metrics and final
log-probabilities beside the workspace's inputs.

Usage: ``models_job.py WORKSPACE``; the workspace holds the graph (``g``), the partition
into P parts (``pP``), its plans (``pP<strategy>``) and the initial weights (``init_<model>.pt``).
"""

import sys
from pathlib import Path

from mpi4py import MPI

from supergcn.distributed.ranks import run_ranked
from supergcn.naming import STRATEGIES
from supergcn.train.config import TrainConfig
from supergcn.train.trainer import train

from models_common import EPOCHS, HEADS, HIDDEN, LAYERS, LR, RUNS, run_name

comm = MPI.COMM_WORLD
root, parts = Path(sys.argv[1]), comm.Get_size()
for model, strategy, bits, kernel in RUNS:
    assert strategy in STRATEGIES
    name = run_name(model, parts, strategy, bits, kernel)
    config = TrainConfig(graph=root / "g", partition=root / f"p{parts}", plan=root / f"p{parts}{strategy}",
                         out=root / f"{name}.jsonl", save_logits=root / f"{name}.npy", model=model, hidden=HIDDEN,
                         num_layers=LAYERS, heads=HEADS, dropout=0.0, epochs=EPOCHS, lr=LR, bits=bits, kernel=kernel,
                         init_weights=root / f"init_{model}.pt")
    if run_ranked(lambda c: train(config, c), comm, "train") != 0:
        sys.exit(1)
print(f"rank {comm.Get_rank()} ok", flush=True)
