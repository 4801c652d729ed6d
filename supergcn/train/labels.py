"""Masked label propagation's split of the training nodes (UniMP; paper §6.1).

Each epoch, ``label_rate`` of every rank's training nodes, drawn afresh, get their label
as an input (through the model's label embedding) and the others carry the loss. The
loss is divided by the GLOBAL number of loss nodes, so the summed gradient is the
single-process one. At evaluation every training label is an input.
"""

from __future__ import annotations

import numpy as np
import torch

from supergcn.distributed.comm import Communicator
from supergcn.distributed.ranks import CollectiveError


class LabelInputSplit:
    """Which of one rank's training nodes are label inputs and which carry the loss."""

    def __init__(self, train_mask: torch.Tensor, label_rate: float, communicator: Communicator) -> None:
        self.train_nodes = torch.nonzero(train_mask).reshape(-1)
        self.num_label_inputs = int(round(label_rate * len(self.train_nodes)))
        loss_nodes = np.array([len(self.train_nodes) - self.num_label_inputs], dtype=np.int64)
        #: Loss nodes over all ranks: the loss's denominator.
        self.global_loss_nodes = int(communicator.allreduce_sum(loss_nodes)[0])
        if self.global_loss_nodes == 0:
            raise CollectiveError(f"label rate {label_rate} leaves no training node for the loss")

    def split(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(nodes whose label is an input, nodes that carry the loss) for one epoch; draws
        from torch's global generator (this rank's stream) when labels are inputs."""
        if self.num_label_inputs == 0:
            return self.train_nodes[:0], self.train_nodes
        order = self.train_nodes[torch.randperm(len(self.train_nodes))]
        return order[:self.num_label_inputs], order[self.num_label_inputs:]
