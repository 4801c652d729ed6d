"""Masked label propagation's split of the training nodes (UniMP; paper §6.1).

Each epoch some training nodes get their label as an input (through the model's label
embedding) and the others carry the loss, drawn afresh on every rank in one of two ways
(:data:`supergcn.naming.LABEL_DRAWS`):

* ``exact``: ``label_rate`` of the training nodes, from each rank's quota
  (:func:`label_input_quotas`); the loss is divided by the GLOBAL number of loss nodes, so
  the summed gradient is the single-process one.
* ``bernoulli``: each training node independently with probability ``label_rate``
  (upstream SuperGCN); the loss is divided by the EXPECTED number of loss nodes,
  ``(1 - label_rate) · N`` for the N training nodes of all ranks.

Either way the expected share of label inputs is ``label_rate`` whatever the partition. At
evaluation every training label is an input.
"""

from __future__ import annotations

import numpy as np
import torch

from supergcn.distributed.comm import Communicator
from supergcn.distributed.ranks import CollectiveError
from supergcn.naming import LABEL_DRAWS


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

    def __init__(self, train_mask: torch.Tensor, label_rate: float, communicator: Communicator,
                 draw: str = "exact") -> None:
        if draw not in LABEL_DRAWS:
            raise ValueError(f"unknown label draw {draw!r}: choose one of {LABEL_DRAWS}")
        self.train_nodes = torch.nonzero(train_mask).reshape(-1)
        self.label_rate, self.draw = label_rate, draw
        counts = np.zeros(communicator.size, dtype=np.int64)
        counts[communicator.rank] = len(self.train_nodes)
        counts = communicator.allreduce_sum(counts)
        quotas = label_input_quotas(counts, label_rate)
        self.num_label_inputs = int(quotas[communicator.rank])
        #: The loss's denominator: loss nodes over all ranks (exact), or their expected number.
        self.loss_denominator: float = (int(counts.sum() - quotas.sum()) if draw == "exact"
                                        else (1 - label_rate) * int(counts.sum()))
        if self.loss_denominator == 0:
            raise CollectiveError(f"label rate {label_rate} leaves no training node for the loss",
                                  "lower --label-rate")

    def split(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(nodes whose label is an input, nodes that carry the loss) for one epoch; draws
        from torch's global generator (this rank's stream) when labels are inputs."""
        if self.draw == "bernoulli" and self.label_rate > 0:
            chosen = torch.rand(len(self.train_nodes)) < self.label_rate
            return self.train_nodes[chosen], self.train_nodes[~chosen]
        if self.num_label_inputs == 0:
            return self.train_nodes[:0], self.train_nodes
        order = self.train_nodes[torch.randperm(len(self.train_nodes))]
        return order[:self.num_label_inputs], order[self.num_label_inputs:]
