"""Distributed neighbour aggregation as a differentiable operator (:class:`GraphOps`).

The exact aggregation runs through the rank's exchange (:mod:`supergcn.distributed.rank_operators`,
forward and, in autograd's backward, its transpose). A compared method replaces it in
training passes: under a DistGNN schedule the mean is the delayed one
(:mod:`supergcn.methods.distgnn`); PipeGCN's schedules (:mod:`supergcn.methods.pipegcn`) and
BNS-GCN's boundary sampling (:mod:`supergcn.methods.bnsgcn`) replace the exchange of every
aggregation with their own, through the same operator.
"""

from __future__ import annotations

from typing import Callable, TypeVar

import numpy as np
import torch

from supergcn.distributed.rank_operators import RankOperators
from supergcn.methods.bnsgcn import BoundarySampling
from supergcn.methods.distgnn import DelayedAggregation, DelayedMean
from supergcn.methods.mixgcn import FeatureParallelAggregation
from supergcn.methods.pipegcn import StaleExchange

T = TypeVar("T")


#: What replaces the exchange: a compared method's state (MixGCN's in every pass, the others'
#: in training passes).
TrainingExchange = DelayedAggregation | StaleExchange | BoundarySampling | FeatureParallelAggregation


class _DistributedAggregation(torch.autograd.Function):
    """``operators.forward`` (an exchange: the exact one or a compared method's) and, in
    backward, its ``backward``."""

    @staticmethod
    def forward(ctx, x, operators: RankOperators | StaleExchange | BoundarySampling | FeatureParallelAggregation,
                row_scale, layer: int):
        ctx.operators, ctx.row_scale, ctx.layer = operators, row_scale, layer
        return operators.forward(x.detach(), row_scale, layer)

    @staticmethod
    def backward(ctx, grad):
        return ctx.operators.backward(grad, ctx.row_scale, ctx.layer), None, None, None


class GraphOps:
    """A rank's aggregations, differentiable through the exchange: what a GNN layer
    (:mod:`supergcn.models`) aggregates with.

    * ``sum(x, row_scale)[v] = row_scale[v] * sum_{u in N(v)} x[u]`` over the global
      in-neighbours of each owned v;
    * ``mean(x)``, the sum scaled by ``1/deg(v)`` (0 for isolated v), deg global; under a
      DistGNN schedule (:mod:`supergcn.methods.distgnn`) the delayed mean in training
      passes, evaluation staying exact.

    Under PipeGCN's schedules and BNS-GCN's sampling (``method``) training passes exchange
    their way, evaluation exactly; under MixGCN's mixture of parallelism every pass
    aggregates its way (exactly). With ``precompute_input`` the first aggregation of every
    pass (layer 0's, of the input features, which do not change) is computed exactly once and
    reused, so that layer 0 exchanges nothing after the first pass (BNS-GCN's and PipeGCN's
    ``--use-pp``).

    A model's own normalisation and per-rank state (GCN's degrees, GAT's routes) live in its
    home and are built once per rank by :meth:`cached`.

    Args:
        operators: the rank's exchange and sparse operators.
        method: a compared method's exchange for training passes; None for the exact one.
        precompute_input: compute layer 0's aggregation once.
    """

    def __init__(self, operators: RankOperators, method: TrainingExchange | None = None,
                 precompute_input: bool = False) -> None:
        self.operators = operators
        self.method = method
        self.precompute_input = precompute_input
        self.layers_begun = 0  # aggregations of the current pass so far: the next one's layer
        degree = torch.from_numpy(operators.plan.in_degree.astype(np.float32))
        self.inv_degree = torch.where(degree > 0, 1.0 / degree.clamp(min=1), torch.zeros_like(degree))
        self._built: dict = {}
        self._input_aggregation: torch.Tensor | None = None

    def cached(self, build: Callable[[GraphOps], T]) -> T:
        """``build(self)``, built on the first call and kept: state a model derives from the
        rank's plan. The first call is collective where ``build`` is.

        Args:
            build: what to build (and the key it is kept under).

        Returns:
            What it built.
        """
        if build not in self._built:
            self._built[build] = build(self)
        return self._built[build]

    def begin_pass(self, training: bool) -> None:
        """Start a forward pass over all layers: a training pass (quantized, delayed
        exchanges where configured) or an evaluation pass (exact float32 exchanges).

        Args:
            training: whether the pass trains.
        """
        self.operators.training = training
        self.operators.timer.activate()
        self.layers_begun = 0
        if training and self.method is not None:
            self.method.begin_pass()

    @property
    def exact(self) -> bool:
        """Whether this pass's aggregations are exact linear maps of their input: float32
        and synchronous exchanges (every evaluation pass; training without quantization or
        a compared method's exchange)."""
        operators = self.operators
        mixture = isinstance(self.method, FeatureParallelAggregation)
        return not operators.training or (operators.settings.bits == 32 and (self.method is None or mixture))

    def begin_epoch(self, epoch: int, last_epoch: int) -> bool:
        """Prepare training epoch ``epoch`` (1-based); True when adaptive bit widths trace it
        and :meth:`reassign_bits` must follow it.

        Args:
            epoch: the epoch about to run, from 1.
            last_epoch: the run's last epoch.

        Returns:
            Whether :meth:`reassign_bits` must follow the epoch (False without adaptive bits).
        """
        adaptive = self.operators.adaptive
        return adaptive is not None and adaptive.begin_epoch(epoch, last_epoch)

    def reassign_bits(self) -> dict:
        """AdaQP's re-assignment after a traced epoch (collective): per exchange, on rank 0,
        rows per width, solver objective and seconds (:meth:`~supergcn.methods.adaqp.AdaptiveBits.reassign`).

        Returns:
            The re-assignment's figures, per exchange.
        """
        return self.operators.adaptive.reassign()

    def state(self) -> dict:
        """The exchange state that lives across epochs, for a checkpoint: the position in
        the stochastic-rounding stream, a compared method's (DistGNN's or PipeGCN's rows in
        flight, BNS-GCN's passes), AdaQP's assignments.

        Returns:
            ``quantize_calls``, ``method`` and ``bit_assignment`` (None where not in use).
        """
        adaptive = self.operators.adaptive
        return {"quantize_calls": self.operators.quantize_calls,
                "method": None if self.method is None else self.method.state(),
                "bit_assignment": None if adaptive is None else adaptive.state()}

    def restore(self, state: dict) -> None:
        """Restore the exchange state :meth:`state` returned, from a checkpoint.

        Args:
            state: what :meth:`state` returned on this rank.
        """
        self.operators.quantize_calls = state["quantize_calls"]
        if self.method is not None:
            self.method.restore(state["method"])
        if self.operators.adaptive is not None:
            self.operators.adaptive.restore(state["bit_assignment"])

    def close(self) -> None:
        """Wait for exchanges still in flight (DistGNN's, PipeGCN's), before MPI is shut down."""
        if self.method is not None:
            self.method.drain()

    def next_layer(self) -> int:
        """The layer of the next aggregation of this pass (0 for the first), counted.

        Returns:
            Its index.
        """
        layer, self.layers_begun = self.layers_begun, self.layers_begun + 1
        return layer

    def sum(self, x: torch.Tensor, row_scale: torch.Tensor | None = None) -> torch.Tensor:
        """``sum_{u in N(v)} x[u]`` over the global neighbours of each owned v, through the
        exchange; differentiable.

        Args:
            x: n x F rows of the rank's nodes.
            row_scale: a factor per output row (n), applied in the kernel; None for none.

        Returns:
            n x F aggregated rows.
        """
        layer = self.next_layer()
        if layer == 0 and self.precompute_input:
            return self._precomputed(x, row_scale)
        training_method = self.operators.training and isinstance(self.method, (StaleExchange, BoundarySampling))
        replaced = training_method or isinstance(self.method, FeatureParallelAggregation)
        return _DistributedAggregation.apply(x, self.method if replaced else self.operators, row_scale, layer)

    def _precomputed(self, x: torch.Tensor, row_scale: torch.Tensor | None) -> torch.Tensor:
        """Layer 0's aggregation, exact, computed at the first call and returned as is after
        (a collective on the first call)."""
        if x.requires_grad:
            raise RuntimeError("a precomputed input aggregation needs the plain features as layer 0's input")
        if self._input_aggregation is None:
            training, self.operators.training = self.operators.training, False  # an exact float32 exchange
            try:
                self._input_aggregation = self.operators.forward(x, row_scale, 0)
            finally:
                self.operators.training = training
        return self._input_aggregation

    def destinations(self, x):
        """The destinations' own rows of a layer's input: all of them, for the rank's rows
        are both (a mini-batch's block has fewer destinations than sources,
        :class:`~supergcn.methods.distgnn_mb.BlockOps`).

        Args:
            x: a layer's input.

        Returns:
            ``x``.
        """
        return x

    def mean(self, x: torch.Tensor) -> torch.Tensor:
        """The mean aggregation (class docstring); the delayed one in training passes under a
        DistGNN schedule.

        Args:
            x: n x F rows of the rank's nodes.

        Returns:
            n x F aggregated rows.
        """
        if isinstance(self.method, DelayedAggregation) and self.operators.training:
            return DelayedMean.apply(x, self.method, self.next_layer())
        return self.sum(x, self.inv_degree)
