"""Distributed neighbour aggregation as a differentiable operator (:class:`GraphOps`).

The exact aggregation runs through the rank's exchange (:mod:`supergcn.distributed.exchange`,
forward and, in autograd's backward, its transpose); under a DistGNN schedule the mean of
training passes is the delayed one (:mod:`supergcn.distributed.delayed`).
"""

from __future__ import annotations

import numpy as np
import torch

from supergcn.distributed.attention import DistributedAttention
from supergcn.distributed.delayed import DelayedAggregation, DelayedMean
from supergcn.distributed.exchange import RankOperators


class _DistributedAggregation(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, operators: RankOperators, row_scale, layer: int):
        ctx.operators, ctx.row_scale, ctx.layer = operators, row_scale, layer
        return operators.forward(x.detach(), row_scale, layer)

    @staticmethod
    def backward(ctx, grad):
        return ctx.operators.backward(grad, ctx.row_scale, ctx.layer), None, None, None


class GraphOps:
    """Normalised aggregations of one rank, differentiable through the exchange.

    * ``mean(x)[v] = (1/deg(v)) * sum_{u in N(v)} x[u]`` (0 for isolated v), deg global;
    * ``gcn(x)[v] = d(v)^{-1/2} * sum_{u in N(v) ∪ {v}} d(u)^{-1/2} x[u]``, ``d = |N(v) ∪ {v}|``
      (PyG's ``gcn_norm`` with ``add_remaining_self_loops``);
    * ``attention(z, ...)[v] = sum_{u in N(v) ∪ {v}} alpha_vu z[u]``, GAT's softmax-weighted
      sum (:mod:`supergcn.distributed.attention`).

    Under a DistGNN schedule (``delayed``, :mod:`supergcn.distributed.delayed`) the mean
    aggregation of training passes is the delayed one; evaluation stays exact.

    Args:
        operators: the rank's exchange and sparse operators.
        delayed: DistGNN's delayed aggregation; None for synchronous exchanges.
    """

    def __init__(self, operators: RankOperators, delayed: DelayedAggregation | None = None) -> None:
        self.operators = operators
        self.delayed = delayed
        self.layers_begun = 0  # aggregations of the current pass so far: the next one's layer
        plan = operators.plan
        degree = torch.from_numpy(plan.in_degree.astype(np.float32))
        self.inv_degree = torch.where(degree > 0, 1.0 / degree.clamp(min=1), torch.zeros_like(degree))
        rows = np.repeat(np.arange(plan.num_owned), np.diff(plan.local_indptr))
        has_loop = np.zeros(plan.num_owned, dtype=bool)
        has_loop[rows[plan.local_indices == rows]] = True
        self.missing_loop = torch.from_numpy((~has_loop).astype(np.float32))[:, None]
        self.inv_sqrt_gcn_degree = (degree + self.missing_loop[:, 0]).rsqrt()
        self._attention: DistributedAttention | None = None  # built (collectively) by the first attention

    def begin_pass(self, training: bool) -> None:
        """Start a forward pass over all layers: a training pass (quantized, delayed
        exchanges where configured) or an evaluation pass (exact float32 exchanges).

        Args:
            training: whether the pass trains.
        """
        self.operators.training = training
        self.layers_begun = 0
        if training and self.delayed is not None:
            self.delayed.begin_pass()

    @property
    def exact(self) -> bool:
        """Whether this pass's aggregations are exact linear maps of their input: float32
        and synchronous exchanges (every evaluation pass; training without quantization or
        a DistGNN schedule)."""
        operators = self.operators
        return not operators.training or (operators.settings.bits == 32 and self.delayed is None)

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
        rows per width, solver objective and seconds (:meth:`~supergcn.distributed.adaptive.AdaptiveBits.reassign`).

        Returns:
            The re-assignment's figures, per exchange.
        """
        return self.operators.adaptive.reassign()

    def state(self) -> dict:
        """The exchange state that lives across epochs, for a checkpoint: the position in
        the stochastic-rounding stream, DistGNN's rows in flight, AdaQP's assignments.

        Returns:
            ``quantize_calls``, ``delayed`` and ``bit_assignment`` (None where not in use).
        """
        adaptive = self.operators.adaptive
        return {"quantize_calls": self.operators.quantize_calls,
                "delayed": None if self.delayed is None else self.delayed.state(),
                "bit_assignment": None if adaptive is None else adaptive.state()}

    def restore(self, state: dict) -> None:
        """Restore the exchange state :meth:`state` returned, from a checkpoint.

        Args:
            state: what :meth:`state` returned on this rank.
        """
        self.operators.quantize_calls = state["quantize_calls"]
        if self.delayed is not None:
            self.delayed.restore(state["delayed"])
        if self.operators.adaptive is not None:
            self.operators.adaptive.restore(state["bit_assignment"])

    def close(self) -> None:
        """Wait for exchanges still in flight (DistGNN's), before MPI is shut down."""
        if self.delayed is not None:
            self.delayed.drain()

    def timed(self, phase: str, function, *inputs):
        """``function(*inputs)`` booked to ``phase`` of the rank's timer (forward and backward).

        Args:
            phase: a phase of :mod:`supergcn.distributed.timing`.
            function: the function to run.
            *inputs: its arguments.

        Returns:
            Its result.
        """
        return self.operators.timer.timed(phase, function, *inputs)

    def _next_layer(self) -> int:
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
        return _DistributedAggregation.apply(x, self.operators, row_scale, self._next_layer())

    def mean(self, x: torch.Tensor) -> torch.Tensor:
        """The mean aggregation (class docstring); the delayed one in training passes under a
        DistGNN schedule.

        Args:
            x: n x F rows of the rank's nodes.

        Returns:
            n x F aggregated rows.
        """
        if self.delayed is not None and self.operators.training:
            return DelayedMean.apply(x, self.delayed, self._next_layer())
        return self.sum(x, self.inv_degree)

    def gcn(self, x: torch.Tensor) -> torch.Tensor:
        """GCN's normalised aggregation with self loops (class docstring).

        Args:
            x: n x F rows of the rank's nodes.

        Returns:
            n x F aggregated rows.
        """
        scale = self.inv_sqrt_gcn_degree[:, None]
        scaled = self.timed("aggregation", torch.mul, x, scale)
        return self.timed("aggregation", self._add_self_loops, self.sum(scaled, self.inv_sqrt_gcn_degree), scaled)

    def attention(self, z: torch.Tensor, source_score: torch.Tensor, destination_score: torch.Tensor,
                  negative_slope: float, dropout: float, training: bool) -> torch.Tensor:
        """GAT's aggregation (class docstring) through the exchange; differentiable. The
        first call is collective (:class:`~supergcn.distributed.attention.DistributedAttention`).

        Args:
            z: n x H x C projected rows of the rank's nodes.
            source_score: n x H, ``a_src · z``.
            destination_score: n x H, ``a_dst · z``.
            negative_slope: LeakyReLU's slope.
            dropout: dropout on the attention coefficients while ``training``.
            training: whether the model trains.

        Returns:
            n x H x C aggregated rows.
        """
        if self._attention is None:
            self._attention = DistributedAttention(self.operators)
        return self._attention(z, source_score, destination_score, self._next_layer(), negative_slope, dropout,
                               training)

    def _add_self_loops(self, aggregated: torch.Tensor, scaled: torch.Tensor) -> torch.Tensor:
        return aggregated + self.missing_loop * scaled * self.inv_sqrt_gcn_degree[:, None]
