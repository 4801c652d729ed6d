"""Run by tests/methods/test_adaqp.py under ``mpiexec -n 3``: a hand-made assignment
of 2, 4 and 8 bits to the rows of one exchange. The bytes sent are those the assignment
implies, nearest rounding stays within each row's own bound, and stochastic rounding gives
the exact aggregation in expectation."""

import numpy as np
import torch
from mpi4py import MPI

from supergcn.data.datasets import prepare_dataset
from supergcn.distributed.comm import Communicator
from supergcn.distributed.graph_ops import GraphOps
from supergcn.distributed.rank_operators import ExchangeSettings, RankOperators
from supergcn.distributed.timing import PhaseTimer
from supergcn.methods.adaqp.codec import AdaptiveBits, AdaptiveSettings, MixedLayout
from supergcn.partition.metis import partition_graph
from supergcn.testing.plans import build_plans

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
graph = prepare_dataset("synthetic-tiny")
plans, _ = build_plans(graph, partition_graph(graph, size), "hybrid")
plan = plans[rank]
WIDTH = 6


def operators_with(rounding):
    operators = RankOperators(plan, Communicator(comm), PhaseTimer(),
                              settings=ExchangeSettings(bits="adaptive", rounding=rounding, seed=3))
    operators.codec = AdaptiveBits(operators.communicator, AdaptiveSettings(), plan.send_counts, plan.recv_counts,
                                   operators.coefficients)
    rng = np.random.default_rng(rank)
    send_bits = rng.choice(np.array([2, 4, 8], dtype=np.uint8), int(plan.send_counts.sum()))
    recv_bits = operators.communicator.ialltoallv(send_bits[:, None].copy(), plan.send_counts,
                                                  plan.recv_counts).wait()[:, 0]
    operators.codec.layouts[(False, 0)] = MixedLayout(send_bits, plan.send_counts, recv_bits, plan.recv_counts)
    return operators, send_bits


x = torch.from_numpy(np.random.default_rng(100 + rank).normal(size=(plan.num_owned, WIDTH)).astype(np.float32))

# Bytes: each peer's rows of each width packed to whole bytes, plus bf16 parameter pairs.
operators, send_bits = operators_with("nearest")
ops = GraphOps(operators)
ops.begin_pass(training=False)
exact = ops.mean(x)
rows = operators.send.matmul(x)
before = {kind: sent.sum() for kind, sent in operators.communicator.bytes_sent.items()}
ops.begin_pass(training=True)
ops.mean(x)
peer = np.repeat(np.arange(size), plan.send_counts)
expected = sum(-(-int(((peer == p) & (send_bits == b)).sum()) * b // 8) * WIDTH for p in range(size) for b in (2, 4, 8))
assert operators.communicator.bytes_sent["data"].sum() - before["data"] == expected, rank
assert operators.communicator.bytes_sent["params"].sum() - before["params"] == len(send_bits) * 2 * 2

# Nearest rounding: every received row within half a step of its own width.
exchange = operators.start_exchange(rows, layer=0)
received = exchange.finish().clone()
truth = operators.communicator.ialltoallv(rows.numpy(), plan.send_counts, plan.recv_counts).wait()
recv_bits = operators.codec.layouts[(False, 0)].receive.bits
span = truth.max(axis=1) - truth.min(axis=1)
bound = span / (2.0 ** recv_bits - 1) / 2 * 1.02 + 1e-6  # bf16 parameters widen the step by under 1%
assert (np.abs(received.numpy() - truth).max(axis=1) <= bound).all(), rank

# Stochastic rounding: the mean over many training passes converges to the exact aggregation.
operators, _ = operators_with("stochastic")
ops = GraphOps(operators)
passes = 150  # the error of the mean shrinks as 1/sqrt(passes): about 0.1 of one pass's here
total, single_error = torch.zeros_like(exact), None
for _ in range(passes):
    ops.begin_pass(training=True)
    y = ops.mean(x)
    total += y
    single_error = single_error or float((y - exact).abs().max())
mean_error = float((total / passes - exact).abs().max())
assert mean_error < 0.15 * single_error, (rank, mean_error, single_error)
print(f"rank {rank} ok {mean_error:.4f} {single_error:.4f}", flush=True)
