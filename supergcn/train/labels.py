"""Masked label propagation's split of the training nodes (UniMP; paper §6.1).

Each epoch, ``label_rate`` of the training nodes, drawn afresh on every rank from its own
quota (:func:`label_input_quotas`), get their label as an input (through the model's
label embedding) and the others carry the loss. The
loss is divided by the GLOBAL number of loss nodes, so the summed gradient is the
single-process one. At evaluation every training label is an input.
"""

from __future__ import annotations

import numpy as np
import torch

from supergcn.distributed.comm import Communicator
from supergcn.distributed.ranks import CollectiveError


def label_input_quotas(train_counts: np.ndarray, label_rate: float) -> np.ndarray:
    """Label inputs per rank, from every rank's number of training nodes.

    Together they are ``floor(label_rate * N + 1/2)`` of the N training nodes, the count a
    single process would draw, whatever the partition: each rank gets ``floor(label_rate * n_r)``
    and the remainder goes one each to the ranks with the largest fractional parts (ties to
    the lower rank; Hamilton's apportionment). Rounding per rank instead would move the
    effective rate with P (ranks of 1, 2, 3 and 4 training nodes would feed 100 %, 50 %,
    67 % and 50 % at rate 0.62).
    """
    counts = np.asarray(train_counts, dtype=np.int64)
    exact = label_rate * counts
    quotas = np.floor(exact).astype(np.int64)
    remainder = int(np.floor(label_rate * counts.sum() + 0.5)) - int(quotas.sum())
    order = np.argsort(-(exact - quotas), kind="stable")
    quotas[order[:remainder]] += 1
    return quotas


class LabelInputSplit:
    """Which of one rank's training nodes are label inputs and which carry the loss."""

    def __init__(self, train_mask: torch.Tensor, label_rate: float, communicator: Communicator) -> None:
        self.train_nodes = torch.nonzero(train_mask).reshape(-1)
        counts = np.zeros(communicator.size, dtype=np.int64)
        counts[communicator.rank] = len(self.train_nodes)
        counts = communicator.allreduce_sum(counts)
        quotas = label_input_quotas(counts, label_rate)
        self.num_label_inputs = int(quotas[communicator.rank])
        #: Loss nodes over all ranks: the loss's denominator.
        self.global_loss_nodes = int(counts.sum() - quotas.sum())
        if self.global_loss_nodes == 0:
            raise CollectiveError(f"label rate {label_rate} leaves no training node for the loss",
                                  "lower --label-rate")

    def split(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(nodes whose label is an input, nodes that carry the loss) for one epoch; draws
        from torch's global generator (this rank's stream) when labels are inputs."""
        if self.num_label_inputs == 0:
            return self.train_nodes[:0], self.train_nodes
        order = self.train_nodes[torch.randperm(len(self.train_nodes))]
        return order[:self.num_label_inputs], order[self.num_label_inputs:]
