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
    assert split.global_loss_nodes == len(train) - expected_inputs
    torch.manual_seed(0)
    draws = [split.split() for _ in range(3)]
    for inputs, loss in draws:
        assert len(inputs) == expected_inputs
        assert sorted(inputs.tolist() + loss.tolist()) == train
    assert not torch.equal(draws[0][0], draws[1][0])


def test_rate_zero_puts_every_training_node_in_the_loss():
    split = LabelInputSplit(mask(10, [1, 4, 7]), 0.0, Communicator(MPI.COMM_SELF))
    inputs, loss = split.split()
    assert inputs.tolist() == [] and loss.tolist() == [1, 4, 7] and split.global_loss_nodes == 3


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
