"""A training epoch's step and what every step shares.

The trainer (:mod:`supergcn.train.trainer`) keeps the epoch loop, evaluation, checkpoints
and metrics; an epoch's training is a step's: the full-batch one here
(:class:`FullBatchStep`), or a compared method's (:attr:`~supergcn.distributed.protocol.RankMethod.step`,
DistGNN-MB's mini-batches). Every step ends its updates with the same
:class:`OptimizerStep` (the gradients' all-reduce, the clip, Adam) and takes its loss as
:func:`nll_share`. A method builds its state from the rank's :class:`RankContext`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from supergcn.distributed.collectives import allreduce_gradients
from supergcn.distributed.comm import Communicator
from supergcn.distributed.rank_operators import RankOperators
from supergcn.distributed.timing import PhaseTimer


class _DistinctRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, rows, index):
        ctx.save_for_backward(index)
        ctx.shape = rows.shape
        return rows.index_select(0, index)

    @staticmethod
    def backward(ctx, grad):
        index, = ctx.saved_tensors
        return grad.new_zeros(ctx.shape).index_copy_(0, index, grad), None


def distinct_rows(rows: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``rows[index]`` for an index whose entries are distinct (a rank's loss nodes): the
    same values, and the same gradient but for a -0.0 (which indexing's 0 + g makes +0.0;
    the loss's gradient has none). Its backward copies each gradient row into zeros, where
    torch's indexing adds it, as indices that may repeat need: 5-9 ms against 24-26 ms for
    91k of 169k rows of 40 classes on 2 threads of an Intel Xeon.

    Args:
        rows: a 2-D tensor.
        index: distinct int64 row numbers.

    Returns:
        The selected rows, differentiable with respect to ``rows``.
    """
    return _DistinctRows.apply(rows, index)


def nll_share(logits: torch.Tensor, labels: torch.Tensor, denominator: float) -> torch.Tensor:
    """This rank's share of a global loss: the NLL of its rows summed, over the rows of all
    ranks (so that the summed gradient is that of the mean over all of them).

    Args:
        logits: the rows' log-probabilities.
        labels: their labels.
        denominator: the rows the loss is taken over, on all ranks.

    Returns:
        A scalar tensor.
    """
    return F.nll_loss(logits, labels, reduction="sum") / denominator


class OptimizerStep:
    """The end of every update: one all-reduce (sum) of all gradients and the loss, the
    gradients' global L2 norm clipped to ``grad_clip`` (every rank holds the same sums, so
    the same clip; 0 = off), Adam's step, the gradients zeroed. Booked to ``optimizer``.

    Args:
        parameters: the model's parameters.
        communicator: the job's communicator.
        optimizer: the model's optimizer.
        grad_clip: the clip's norm, or 0.
        timer: the rank's phase timer.
    """

    def __init__(self, parameters: list, communicator: Communicator, optimizer: torch.optim.Optimizer,
                 grad_clip: float, timer: PhaseTimer) -> None:
        self.parameters, self.communicator, self.optimizer = parameters, communicator, optimizer
        self.grad_clip, self.timer = grad_clip, timer

    def __call__(self, loss: torch.Tensor) -> float:
        """Apply the rank's gradients of ``loss`` (already back-propagated).

        Args:
            loss: this rank's share of the global loss.

        Returns:
            The global loss.
        """
        with self.timer.phase("optimizer"):
            global_loss = allreduce_gradients(self.parameters, loss, self.communicator)
            if self.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(self.parameters, self.grad_clip)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=False)
        return global_loss


@dataclass
class RankContext:
    """What a compared method's card builds its state on one rank from
    (the ``build`` of its card's ``runtime`` module, :mod:`supergcn.methods.runtime`).

    Args:
        config: the run's :class:`~supergcn.train.config.TrainConfig`.
        data: the rank's rows (:class:`~supergcn.train.data.RankData`).
        operators: the rank's exact exchange and sparse operators.
        communicator: the job's communicator.
        timer: the rank's phase timer.
        model: the rank's replica of the model.
        loss: :func:`nll_share`.
        optimizer_step: the run's :class:`OptimizerStep`.
    """

    config: Any
    data: Any
    operators: RankOperators
    communicator: Communicator
    timer: PhaseTimer
    model: torch.nn.Module
    loss: Any
    optimizer_step: OptimizerStep


class FullBatchStep:
    """A full-batch epoch: the model's forward over the rank's rows through its ops (a
    method's exchange where it has one), the loss on the rank's loss nodes over ALL ranks'
    loss nodes, backward, a barrier (the wait for slower ranks, booked to
    ``synchronization``) and the optimizer step.

    Args:
        context: the rank's context.
        ops: the rank's :class:`~supergcn.distributed.graph_ops.GraphOps`.
        labels: label propagation's split of the training nodes
            (:class:`~supergcn.train.labels.LabelInputSplit`).
    """

    def __init__(self, context: RankContext, ops, labels) -> None:
        self.context, self.ops, self.labels = context, ops, labels

    def run(self, epoch: int) -> float:
        """One epoch's update.

        Args:
            epoch: the epoch, from 1.

        Returns:
            The global loss.
        """
        context, data = self.context, self.context.data
        context.model.train()
        label_nodes, loss_nodes = self.labels.split()
        logits = context.model(data.x, self.ops, label_nodes, data.y[label_nodes])
        loss = context.timer.timed("elementwise", self.loss, logits, loss_nodes)
        loss.backward()
        with context.timer.phase("synchronization"):
            context.communicator.comm.Barrier()
        return context.optimizer_step(loss)

    def loss(self, logits: torch.Tensor, loss_nodes: torch.Tensor) -> torch.Tensor:
        """This rank's share of the global loss: its loss nodes' NLL over ALL ranks' loss nodes.

        Args:
            logits: this rank's log-probabilities, one row per owned node.
            loss_nodes: the owned nodes the loss is taken over.

        Returns:
            A scalar tensor; summed over the ranks, the global loss.
        """
        return nll_share(distinct_rows(logits, loss_nodes), self.context.data.y[loss_nodes],
                         self.labels.loss_denominator)
