"""Run by tests/methods/test_distgnn_mb.py under ``mpiexec -n 2`` on synthetic-tiny in two
parts (``p2``, ``p2hybrid`` of the workspace its argument names): DistGNN-MB's step is a step
as every run's.

* The gradient clip applies to every mini-batch step (clip_grad_norm_ called once a step),
  as to a full-batch epoch.
* A step's stages (sampling, forward, backward, all-reduce, cache) book every instant once:
  on every rank they add up to no more than the epoch's wall time, the push made inside the
  forward counted once, to the cache.
* ``--kernel torch`` is honoured: with the numba gather and attention kernels made to fail,
  SAGE and GAT still train on mini-batches, and their losses equal the numba kernels' to
  float rounding.
"""

import sys
from pathlib import Path

import torch
from mpi4py import MPI

import supergcn.kernels.attention as attention
import supergcn.kernels.gather as gather
from supergcn.train.config import TrainConfig
from supergcn.train.trainer import Trainer

from distgnn_mb_common import FANOUTS, HIDDEN, LAYERS, SEED

root = Path(sys.argv[1])
comm = MPI.COMM_WORLD


def trainer(out: str, **options) -> Trainer:
    config = TrainConfig(graph=root / "g", partition=root / "p2", plan=root / "p2hybrid", out=root / out,
                         hidden=HIDDEN, num_layers=LAYERS, seed=SEED, epochs=2, batch_size=100, fanouts=FANOUTS,
                         hec_push=20, dropout=0.0, **options)
    return Trainer(config, comm)


# The clip, once a step.
clips = []
clip = torch.nn.utils.clip_grad_norm_
torch.nn.utils.clip_grad_norm_ = lambda *args, **kwargs: clips.append(args) or clip(*args, **kwargs)
run = trainer("clipped.jsonl", grad_clip=0.5)
steps = 0
for epoch in (1, 2):
    loss, seconds, _ = run.train_step(epoch)
    steps += run.method.figures["steps"]
    stages = run.method.figures["seconds"]
    assert sum(stages.values()) <= seconds["total"], (comm.Get_rank(), stages, seconds["total"])
    run.method.end_epoch()
assert len(clips) == steps > 2, (len(clips), steps)
torch.nn.utils.clip_grad_norm_ = clip

# The torch kernels, with the numba ones failing.
losses = {}
for model in ("sage", "gat"):
    for kernel in ("numba", "torch"):
        saved = (gather.GatherCsr.__init__, attention.AttentionCsr.__init__)
        if kernel == "torch":
            def refused(*args, **kwargs):
                raise AssertionError("a numba kernel was built under --kernel torch")
            gather.GatherCsr.__init__ = attention.AttentionCsr.__init__ = refused
        torch.manual_seed(0)
        run = trainer(f"{model}-{kernel}.jsonl", model=model, kernel=kernel, **({"heads": 2} if model == "gat" else {}))
        losses[model, kernel] = [run.train_step(epoch)[0] for epoch in (1, 2)]
        run.method.close()
        gather.GatherCsr.__init__, attention.AttentionCsr.__init__ = saved
    assert torch.allclose(torch.tensor(losses[model, "numba"]), torch.tensor(losses[model, "torch"]), rtol=1e-4), (
        model, losses)
print(f"rank {comm.Get_rank()} ok", flush=True)
