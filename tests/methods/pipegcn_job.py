"""Run by tests/methods/test_pipegcn.py under ``mpiexec -n 2`` with PipeGCN schedules
(``pipe``, ``pipe-fg``), each in turn: every aggregation and its gradient on a hand-made graph checked
against values worked out by hand (epoch t sees epoch t - 1's rows and gradients, zeros at
the first), and beside DistGNN's cd-1 on the same graph."""

import sys

import torch
from mpi4py import MPI

from supergcn.distributed.comm import Communicator
from supergcn.distributed.graph_ops import GraphOps
from supergcn.distributed.rank_operators import RankOperators
from supergcn.distributed.timing import PhaseTimer
from supergcn.methods.distgnn.exchange import DelayedAggregation
from supergcn.methods.pipegcn.exchange import StaleExchange
from supergcn.testing.plans import HAND_LOCAL, HAND_REMOTE, build_plans, hand_graph

GAMMA = 0.9  # the smoothing momentum under pipe-fg

# Rank 0 owns 0, 1, 2 and rank 1 owns 3, 4, 5 (supergcn.testing.plans.hand_graph).
local, remote = HAND_LOCAL, HAND_REMOTE
degree = {v: len(local[v]) + len(remote[v]) for v in local}

graph, parts = hand_graph()

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
owned = [0, 1, 2] if rank == 0 else [3, 4, 5]
communicator = Communicator(comm)


def rank_ops(strategy, method):
    plans, _ = build_plans(graph, parts, strategy)
    operators = RankOperators(plans[rank], communicator, PhaseTimer())
    return GraphOps(operators, method(operators))


def features(t):
    """Every node's input at pass t (a different value per node and pass); 0 before pass 1."""
    return {u: float(t > 0) * (t + 1) * (10.0 * u + 1) for u in range(6)}


def weights(t):
    """The loss's weight of every destination at pass t: dLoss/dy_v; 0 before pass 1."""
    return {v: float(t > 0) * (1.0 + v + 0.5 * t) for v in range(6)}


def smoothed(values, smoothing):
    """What the stale rows are under the schedule: as sent (pipe), or, ``smoothing``, their
    moving average A_t = gamma A_{t-1} + (1 - gamma) B_{t-1}, A_1 = 0 (pipe-fg)."""
    if not smoothing:
        return values[-2]
    average = 0.0
    for sent in values[:-1]:  # B_0 (zero) ... B_{t-1}
        average = GAMMA * average + (1 - GAMMA) * sent
    return average


def run(ops, x, w):
    ops.begin_pass(True)
    inputs = torch.tensor([[x[v]] for v in owned], dtype=torch.float32, requires_grad=True)
    y = ops.mean(inputs)
    (y * torch.tensor([[w[v]] for v in owned])).sum().backward()
    return y.detach()[:, 0], inputs.grad[:, 0]


def check(schedule):
    """Six passes of ``schedule`` and of cd-1 against the hand-worked values."""
    pipe = rank_ops("post", lambda operators: StaleExchange(operators, schedule, GAMMA))
    cd1 = rank_ops("pre", lambda operators: DelayedAggregation(operators, "cd-1"))
    smoothing = schedule == "pipe-fg"
    for t in range(1, 7):
        y, grad = run(pipe, features(t), weights(t))
        y_cd1, grad_cd1 = run(cd1, features(t), weights(t))
        history = range(t + 1)  # passes 0 (nothing sent) .. t
        for row, v in enumerate(owned):
            stale = sum(smoothed([features(s)[u] for s in history], smoothing) for u in remote[v])
            expected = (sum(features(t)[u] for u in local[v]) + stale) / degree[v]
            assert abs(y[row].item() - expected) < 1e-3, (schedule, rank, t, v, y[row].item(), expected)
            if t >= 2:  # cd-1's arrived rows are pipe's and its degree is the full one from pass 2 on
                assert abs(y_cd1[row].item() - y[row].item()) < 1e-3 or smoothing, (rank, t, v)
            else:  # pass 1: pipe divides by the full degree, cd-1 by what arrived (the local one)
                assert abs(y[row].item() * degree[v] - y_cd1[row].item() * max(len(local[v]), 1)) < 1e-3
        for row, u in enumerate(owned):
            here = sum(weights(t)[v] / degree[v] for v in local[u])
            there = smoothed([sum(weights(s)[v] / degree[v] for v in remote[u]) for s in history], smoothing)
            assert abs(grad[row].item() - (here + there)) < 1e-4, (schedule, rank, t, u, grad[row].item(), here + there)
            if t >= 2:  # cd-1 sends no gradient: only the local part
                assert abs(grad_cd1[row].item() - here) < 1e-4, (rank, t, u, grad_cd1[row].item(), here)
    pipe.exchange.close()
    cd1.exchange.close()


assert sys.argv[1:], "usage: pipegcn_job.py SCHEDULE..."
for schedule in sys.argv[1:]:
    check(schedule)
print(f"rank {rank} ok", flush=True)
