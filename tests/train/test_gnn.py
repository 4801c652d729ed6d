"""GAT's options on one rank: attention dropout and the heads' width check."""

import numpy as np
import pytest
import torch
from mpi4py import MPI

from supergcn.data.datasets import prepare_dataset
from supergcn.distributed.comm import Communicator
from supergcn.distributed.graph_ops import GraphOps
from supergcn.distributed.rank_operators import RankOperators
from supergcn.distributed.timing import PhaseTimer
from supergcn.partition.metis import partition_graph
from supergcn.testing.plans import build_plans
from supergcn.train.gnn import GNN


@pytest.fixture(scope="module")
def one_rank():
    graph = prepare_dataset("synthetic-tiny")
    plan = build_plans(graph, partition_graph(graph, 1), "hybrid")[0][0]
    x = torch.from_numpy(np.asarray(graph.features)[plan.owned_old_ids]).float()
    return graph, x, GraphOps(RankOperators(plan, Communicator(MPI.COMM_SELF), PhaseTimer()))


def test_attention_dropout_draws_in_training_only(one_rank):
    graph, x, ops = one_rank
    torch.manual_seed(0)
    dropping = GNN("gat", x.shape[1], 16, graph.num_classes, dropout=0.0, heads=4, attention_dropout=0.5)
    exact = GNN("gat", x.shape[1], 16, graph.num_classes, dropout=0.0, heads=4)
    exact.load_state_dict(dropping.state_dict())
    for model in (dropping, exact):
        model.eval()
    ops.begin_pass(training=False)
    np.testing.assert_array_equal(dropping(x, ops).detach(), exact(x, ops).detach())
    dropping.train()
    ops.begin_pass(training=True)
    first = dropping(x, ops)
    first.sum().backward()
    ops.begin_pass(training=True)
    second = dropping(x, ops)
    assert torch.isfinite(first).all() and not torch.equal(first, second)
    assert all(torch.isfinite(p.grad).all() for p in dropping.parameters())


def test_heads_must_divide_the_hidden_width():
    with pytest.raises(ValueError, match="3 attention heads do not divide the hidden width 16"):
        GNN("gat", 8, 16, 4, heads=3)
