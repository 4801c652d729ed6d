"""The rank's aggregation operator: buffers reused across epochs, one exchange at a time."""

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


@pytest.fixture(scope="module")
def operators():
    graph = prepare_dataset("synthetic-tiny")
    plans, _ = build_plans(graph, partition_graph(graph, 1), "hybrid")
    return RankOperators(plans[0], Communicator(MPI.COMM_SELF), PhaseTimer())


def test_repeated_epochs_reuse_their_buffers_and_agree(operators):
    ops = GraphOps(operators)
    x = torch.randn(operators.plan.num_owned, 6, requires_grad=True)
    results, pool_sizes = [], []
    for _ in range(3):
        y = ops.mean(x)
        (grad,) = torch.autograd.grad((y * y).sum(), x)
        results.append((y.detach(), grad))
        pool_sizes.append(operators.buffers.nbytes)
    assert pool_sizes[0] == pool_sizes[1] == pool_sizes[2]
    for y, grad in results[1:]:
        assert torch.equal(y, results[0][0]) and torch.equal(grad, results[0][1])


def test_a_second_exchange_before_the_first_finishes_is_a_bug(operators):
    rows = torch.zeros(int(operators.send_counts.sum()), 3)
    exchange = operators.start_exchange(rows)
    with pytest.raises(RuntimeError, match="still in flight"):
        operators.start_exchange(rows)
    exchange.finish()
    operators.start_exchange(rows).finish()


class _Exchanging:
    """A method's exchange as GraphOps sees it, with its own form of one model state."""

    exact, owns_normalisation = True, False

    def __init__(self, in_evaluation: bool, state, form) -> None:
        self.in_evaluation, self.rank_states = in_evaluation, {state: form}


def test_an_exchange_s_own_form_of_a_model_state_is_built_in_its_place(operators):
    """A method's exchange that takes every pass builds its form of a model's rank state
    (SAR's sequential softmax for GAT's attention); the model's own is built otherwise, and
    an exchange that takes only training passes may not give one (one form serves every pass)."""
    from supergcn.models.ops import RankState

    state, other = RankState(lambda ops: "the model's"), RankState(lambda ops: "another model's")
    ops = GraphOps(operators, _Exchanging(True, state, lambda ops: ("the method's", ops)))
    assert ops.cached(state) == ("the method's", ops) and ops.cached(state) is ops.cached(state)
    assert ops.cached(other) == "another model's"
    assert GraphOps(operators).cached(state) == "the model's"
    with pytest.raises(ValueError, match="must take the evaluation passes too"):
        GraphOps(operators, _Exchanging(False, state, lambda ops: "the method's"))
