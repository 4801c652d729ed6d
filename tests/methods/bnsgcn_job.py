"""Run by tests/methods/test_bnsgcn.py under ``mpiexec -n 2``: BNS-GCN's boundary sampling
on a hand-made graph.

* p = 1 draws every row: forward and backward equal the plain exchange's bit for bit, on
  post and hybrid plans, at several widths.
* p = 0.5 on the post plan: each rank sends its peer 3 boundary rows, so each pass draws
  k = floor(1.5) = 1 of them, scaled by n / k = 3. Every output and input gradient is
  checked against the hand-worked formula for the one row drawn each way, and each row is
  drawn about a third of the time (what makes the sampled sum unbiased).
* A sampler restored from a checkpoint's state (what the trainer saves of it, its
  ``state``) draws what the uninterrupted one drew from there on.
"""

import io
import math

import numpy as np
import torch
from mpi4py import MPI

from supergcn.distributed.comm import Communicator
from supergcn.distributed.graph_ops import GraphOps
from supergcn.distributed.rank_operators import RankOperators
from supergcn.distributed.timing import PhaseTimer
from supergcn.methods.bnsgcn.exchange import BoundarySampling
from supergcn.testing.plans import HAND_LOCAL, HAND_REMOTE, build_plans, hand_graph

# Rank 0 owns 0, 1, 2 and rank 1 owns 3, 4, 5 (supergcn.testing.plans.hand_graph).
local, remote = HAND_LOCAL, HAND_REMOTE
degree = {v: len(local[v]) + len(remote[v]) for v in local}
graph, parts = hand_graph()

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
owned = [0, 1, 2] if rank == 0 else [3, 4, 5]
peers = [3, 4, 5] if rank == 0 else [0, 1, 2]
communicator = Communicator(comm)


def operators_of(strategy):
    plans, _ = build_plans(graph, parts, strategy)
    return RankOperators(plans[rank], communicator, PhaseTimer())


def through(ops, x, grad_out):
    """(y, dLoss/dx) of one training pass's mean aggregation, dLoss/dy = grad_out."""
    ops.begin_pass(True)
    inputs = x.clone().requires_grad_(True)
    y = ops.mean(inputs)
    y.backward(grad_out)
    return y.detach(), inputs.grad


# p = 1: the plain exchange, bit for bit.
generator = torch.Generator().manual_seed(rank)
for strategy in ("post", "hybrid"):
    plain = GraphOps(operators_of(strategy))
    sampled = GraphOps(plain.operators, BoundarySampling(plain.operators, 1.0, seed=3))
    for width in (1, 5, 17):
        x = torch.randn(3, width, generator=generator)
        grad_out = torch.randn(3, width, generator=generator)
        expected, got = through(plain, x, grad_out), through(sampled, x, grad_out)
        assert torch.equal(expected[0], got[0]) and torch.equal(expected[1], got[1]), (strategy, width)

# p = 0.5: one of three rows each way, times 3.
RATE, SEED = 0.5, 11


def sampling_ops():
    operators = operators_of("post")
    return GraphOps(operators, BoundarySampling(operators, RATE, seed=SEED))


x_value = {u: 10.0 * u + 1 for u in range(6)}
w_value = {v: 1.0 + v for v in range(6)}
x = torch.tensor([[x_value[v]] for v in owned])
w = torch.tensor([[w_value[v]] for v in owned])


def forward_if(u_star):
    """y of the owned nodes where the peer drew its row u_star (sent times 3)."""
    return [(sum(x_value[u] for u in local[v]) + 3 * x_value[u_star] * (u_star in remote[v])) / degree[v]
            for v in owned]


def backward_if(u_star):
    """dLoss/dx of the owned nodes where this rank drew its row u_star (gradient times 3)."""
    return [sum(w_value[v] / degree[v] for v in local[u])
            + 3 * (u == u_star) * sum(w_value[v] / degree[v] for v in remote[u]) for u in owned]


def drawn_in_pass(ops):
    """(the peer's row drawn towards this rank, this rank's row drawn towards the peer) of
    one training pass, each the one candidate whose hand-worked values the pass computed."""
    y, grad = through(ops, x, w)
    there = [u for u in peers if np.allclose(y[:, 0].numpy(), forward_if(u), rtol=1e-5)]
    here = [u for u in owned if np.allclose(grad[:, 0].numpy(), backward_if(u), rtol=1e-5)]
    assert len(there) == 1 and len(here) == 1, (rank, y[:, 0].tolist(), grad[:, 0].tolist())
    return there[0], here[0]


# Each pass draws each of the 3 rows with probability 1/3, independently of the other
# passes, so a row's count in n passes is Binomial(n, 1/3): mean n/3, standard deviation
# sqrt(2n/9) (3.2 at n = 45). The bound is 3 of those. A draw that never took one of the
# rows would be n/3 = 15 off, one that always took the same row 2n/3 = 30.
passes, resume_at, resumed_passes = 45, 20, 5
ops, drawn_there, drawn_here, checkpoint = sampling_ops(), [], [], None
for done in range(passes):
    if done == resume_at:  # as the trainer writes a rank's state (torch.save, read weights only)
        checkpoint = io.BytesIO()
        torch.save(ops.exchange.state(), checkpoint)
    there, here = drawn_in_pass(ops)
    drawn_there.append(there)
    drawn_here.append(here)
bound = 3 * math.sqrt(passes * (1 / 3) * (2 / 3))
for u in owned:
    assert abs(drawn_here.count(u) - passes / 3) < bound, (rank, u, drawn_here.count(u), bound)
# What the peer drew, seen from here, is what the peer says it drew.
assert comm.sendrecv(drawn_here, dest=1 - rank, source=1 - rank) == drawn_there

# Resumed: a new sampler given the state after resume_at passes draws what the first drew
# next. A sampler that ignored the state would draw passes 1, 2, ... again: they differ.
after = slice(resume_at, resume_at + resumed_passes)
assert drawn_here[after] != drawn_here[:resumed_passes] or drawn_there[after] != drawn_there[:resumed_passes]
resumed = sampling_ops()
checkpoint.seek(0)
resumed.exchange.restore(torch.load(checkpoint, weights_only=True))
assert [drawn_in_pass(resumed) for _ in range(resumed_passes)] == list(zip(drawn_there[after], drawn_here[after]))
print(f"rank {rank} ok", flush=True)
