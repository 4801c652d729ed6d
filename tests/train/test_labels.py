"""Masked label propagation's per-epoch split of a rank's training nodes."""

import numpy as np
import pytest
import torch
from mpi4py import MPI

from supergcn.distributed.comm import Communicator
from supergcn.distributed.ranks import CollectiveError
from supergcn.train.labels import LabelInputSplit, label_input_quotas


def mask(size, chosen):
    result = torch.zeros(size, dtype=torch.bool)
    result[chosen] = True
    return result


def test_split_draws_the_rate_afresh_each_epoch():
    train = list(range(0, 40, 2))
    split = LabelInputSplit(mask(40, train), 0.62, Communicator(MPI.COMM_SELF))
    expected_inputs = round(0.62 * len(train))
    assert split.loss_denominator == len(train) - expected_inputs
    torch.manual_seed(0)
    draws = [split.split() for _ in range(3)]
    for inputs, loss in draws:
        assert len(inputs) == expected_inputs
        assert sorted(inputs.tolist() + loss.tolist()) == train
    assert not torch.equal(draws[0][0], draws[1][0])


def test_rate_zero_puts_every_training_node_in_the_loss():
    split = LabelInputSplit(mask(10, [1, 4, 7]), 0.0, Communicator(MPI.COMM_SELF))
    inputs, loss = split.split()
    assert inputs.tolist() == [] and loss.tolist() == [1, 4, 7] and split.loss_denominator == 3


def test_a_rate_that_leaves_no_loss_node_is_refused():
    with pytest.raises(CollectiveError, match="leaves no training node for the loss"):
        LabelInputSplit(mask(10, [3]), 0.6, Communicator(MPI.COMM_SELF))


@pytest.mark.parametrize("counts", [[1, 1, 1, 1], [1, 2, 3, 4], [0, 7, 1, 5, 2], [3], [40, 1, 1, 1]])
@pytest.mark.parametrize("rate", [0.62, 0.5, 0.1, 0.9])
def test_the_global_share_of_label_inputs_does_not_depend_on_the_partition(counts, rate):
    """Spread over P ranks, the label inputs add up to what one process holding every
    training node would draw, and no rank's quota leaves its share by a node or more."""
    quotas = label_input_quotas(np.array(counts), rate)
    assert quotas.sum() == label_input_quotas(np.array([sum(counts)]), rate)[0] == int(np.floor(rate * sum(counts)
                                                                                                 + 0.5))
    assert np.all(np.abs(quotas - rate * np.array(counts)) < 1) and np.all((0 <= quotas) & (quotas <= counts))


def test_four_ranks_of_one_training_node_keep_loss_nodes():
    """Rounded per rank, rate 0.62 made every one of them a label input and left no loss."""
    assert label_input_quotas(np.array([1, 1, 1, 1]), 0.62).tolist() == [1, 1, 0, 0]


class PartOfAWorld:
    """Rank ``rank`` of a world whose ranks hold ``counts`` training nodes (allreduce_sum's answer)."""

    def __init__(self, counts, rank):
        self.counts, self.rank, self.size = np.array(counts), rank, len(counts)

    def allreduce_sum(self, local):
        assert local[self.rank] == self.counts[self.rank] and local.sum() == local[self.rank]
        return self.counts.copy()


@pytest.mark.parametrize("counts", [[1000], [500, 500], [1, 2, 3, 994], [250, 0, 400, 350]])
@pytest.mark.parametrize("draw", ["exact", "bernoulli"])
def test_every_rank_divides_the_loss_by_the_same_global_count_whatever_the_partition(counts, draw):
    """exact: the loss nodes of all ranks, as one process would count them; bernoulli: their
    expected number (1 - rate) · N, upstream's denominator."""
    rate = 0.62
    single = LabelInputSplit(mask(1000, list(range(1000))), rate, Communicator(MPI.COMM_SELF), draw)
    for rank, count in enumerate(counts):
        split = LabelInputSplit(mask(count, list(range(count))), rate, PartOfAWorld(counts, rank), draw)
        assert split.loss_denominator == pytest.approx(single.loss_denominator)
    assert single.loss_denominator == pytest.approx((1 - rate) * 1000 if draw == "bernoulli"
                                                    else 1000 - int(np.floor(rate * 1000 + 0.5)))


def test_the_bernoulli_draw_takes_each_training_node_independently_with_the_rate():
    rate, train, epochs = 0.62, list(range(0, 2000, 2)), 200
    split = LabelInputSplit(mask(2000, train), rate, Communicator(MPI.COMM_SELF), "bernoulli")
    torch.manual_seed(0)
    chosen = torch.zeros(2000)
    sizes = []
    for _ in range(epochs):
        inputs, loss = split.split()
        assert sorted(inputs.tolist() + loss.tolist()) == train
        chosen[inputs] += 1
        sizes.append(len(inputs))
    # The count varies from epoch to epoch (the exact draw's never does); its mean is the
    # rate within 5 standard errors, and no node is always or never an input.
    assert len(set(sizes)) > 10
    standard_error = (rate * (1 - rate) / (len(train) * epochs)) ** 0.5
    assert abs(np.mean(sizes) / len(train) - rate) < 5 * standard_error
    frequency = chosen[train] / epochs
    assert 0 < frequency.min() and frequency.max() < 1 and abs(frequency.mean().item() - rate) < 0.01


def test_an_unknown_draw_is_refused():
    with pytest.raises(ValueError, match="unknown label draw 'binomial'"):
        LabelInputSplit(mask(10, [1, 4]), 0.5, Communicator(MPI.COMM_SELF), "binomial")
