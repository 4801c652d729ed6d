"""Run by tests/methods/test_distgnn.py under ``mpiexec -n 2``: DistGNN's cd-2 on a
hand-made graph, every aggregation and its gradient checked against values worked out by
hand."""

import torch
from mpi4py import MPI

from supergcn.distributed.comm import Communicator
from supergcn.distributed.graph_ops import GraphOps
from supergcn.distributed.rank_operators import RankOperators
from supergcn.distributed.timing import PhaseTimer
from supergcn.methods.distgnn.exchange import DelayedAggregation
from supergcn.testing.plans import HAND_LOCAL, HAND_REMOTE, build_plans, hand_graph

# Rank 0 owns 0, 1, 2 and rank 1 owns 3, 4, 5 (supergcn.testing.plans.hand_graph).
local, remote = HAND_LOCAL, HAND_REMOTE
# Partial rows go out in destination order, cut into 2 contiguous buckets per peer block
# of 3 rows: bucket 0 = the first row (destinations 0 and 3), bucket 1 = the other two.
bucket_of = {0: 0, 3: 0, 1: 1, 2: 1, 4: 1, 5: 1}
DELAY = 2

plans, _ = build_plans(*hand_graph(), "pre")

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
owned = [0, 1, 2] if rank == 0 else [3, 4, 5]
operators = RankOperators(plans[rank], Communicator(comm), PhaseTimer())
delayed = DelayedAggregation(operators, f"cd-{DELAY}")
ops = GraphOps(operators, delayed.exchange)  # the delayed mean in training passes


def features(t):
    """Every node's input at pass t (a different value per node and pass)."""
    return {u: (t + 1) * (10.0 * u + 1) for u in range(6)}


for t in range(7):
    ops.begin_pass(training=True)
    x = features(t)
    inputs = torch.tensor([[x[v]] for v in owned], dtype=torch.float32, requires_grad=True)
    y = ops.mean(inputs)  # one layer a pass
    degree = {}
    for row, v in enumerate(owned):
        total, degree[v] = sum(x[u] for u in local[v]), len(local[v])
        if t >= DELAY and bucket_of[v] == t % DELAY:  # the partial sum of pass t - 2 arrives
            total += sum(features(t - DELAY)[u] for u in remote[v])
            degree[v] += len(remote[v])
        expected = total / degree[v] if degree[v] else 0.0
        assert abs(y[row, 0].item() - expected) < 1e-4, (rank, t, v, y[row, 0].item(), expected)
    # d/dx_u of sum_v w_v y_v: local destinations only, each over its degree of this pass.
    weights = torch.arange(1.0, len(owned) + 1)[:, None]
    (y * weights).sum().backward()
    for row, u in enumerate(owned):
        expected = sum(weights[owned.index(v), 0].item() / degree[v] for v in local[u])
        assert abs(inputs.grad[row, 0].item() - expected) < 1e-5, (rank, t, u, inputs.grad[row, 0].item(), expected)
delayed.close()
print(f"rank {rank} ok", flush=True)
