"""Run by tests/distributed/test_bfloat16.py under ``mpiexec -n 3``: the same rows exchanged
in float32 and in bfloat16 (``bits`` 16) over a hybrid plan of three parts. What arrives
in bfloat16 is, bit for bit, the float32 arrival rounded to nearest even (torch's
conversion: NaN stays NaN, ±inf as it is), forward and backward, in half the bytes and
one message a peer."""

import numpy as np
import torch
from mpi4py import MPI

from supergcn.data.datasets import prepare_dataset
from supergcn.distributed.comm import Communicator
from supergcn.distributed.rank_operators import ExchangeSettings, RankOperators
from supergcn.distributed.timing import PhaseTimer
from supergcn.partition.metis import partition_graph
from supergcn.testing.plans import build_plans

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
graph = prepare_dataset("synthetic-tiny")
plans, _ = build_plans(graph, partition_graph(graph, comm.Get_size()), "hybrid")
plan = plans[rank]


def exchanged(bits: int, rows: torch.Tensor, reverse: bool) -> tuple[np.ndarray, dict]:
    communicator = Communicator(comm)
    operators = RankOperators(plan, communicator, PhaseTimer(), settings=ExchangeSettings(bits=bits, overlap=False))
    operators.training = True
    received = operators.start_exchange(rows, reverse=reverse).finish().numpy().copy()
    sent = {kind: int(counts.sum()) for kind, counts in communicator.bytes_sent.items()}
    communicator.close()
    return received, sent


for reverse in (False, True):
    counts = plan.recv_counts if reverse else plan.send_counts
    generator = torch.Generator().manual_seed(10 * rank + reverse)
    rows = torch.randn(int(counts.sum()), 37, generator=generator) * 100
    if len(rows):  # values at a tie, past bfloat16's range, and not numbers at all
        special = torch.tensor([1.00390625, 1.01171875, -1.00390625, 3.4e38, -3.4e38, float("nan"), float("inf"),
                                -float("inf"), 1e-40, 0.0, -0.0])
        rows[0, :len(special)] = special
    fp32, fp32_bytes = exchanged(32, rows, reverse)
    bf16, bf16_bytes = exchanged(16, rows, reverse)
    rounded = torch.from_numpy(fp32).to(torch.bfloat16).float().numpy()
    assert np.array_equal(np.isnan(bf16), np.isnan(rounded)), "NaN arrives where NaN was sent"
    finite = ~np.isnan(rounded)
    assert np.array_equal(bf16[finite].view(np.uint32), rounded[finite].view(np.uint32)), "bit for bit"
    assert bf16_bytes.get("data", 0) * 2 == fp32_bytes.get("data", 0) and not bf16_bytes.get("params", 0)
print(f"rank {rank} ok", flush=True)
