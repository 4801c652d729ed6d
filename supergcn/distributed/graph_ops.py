"""Distributed neighbour aggregation as a differentiable operator (:class:`GraphOps`).

The exact aggregation runs through the rank's exchange (:mod:`supergcn.distributed.rank_operators`,
forward and, in autograd's backward, its transpose). A compared method may put its own
exchange in the one slot :class:`GraphOps` holds (:class:`~supergcn.distributed.protocol.Exchange`):
it takes the training passes, and the evaluation passes too where it says so; the operator
never learns which method it runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from supergcn.distributed.operators import inverse_degree
from supergcn.distributed.protocol import Exchange
from supergcn.distributed.rank_operators import RankOperators
from supergcn.kernels.rounding import rounded_rows


class _Aggregation(torch.autograd.Function):
    """``exchange.forward`` (the exact exchange's or a compared method's) and, in backward,
    its ``backward``."""

    @staticmethod
    def forward(ctx, x, exchange: Exchange, row_scale, layer: int):
        ctx.exchange, ctx.row_scale, ctx.layer, ctx.rows_dtype = exchange, row_scale, layer, x.dtype
        return exchange.forward(x.detach(), row_scale, layer)

    @staticmethod
    def backward(ctx, grad):
        grad_x = ctx.exchange.backward(grad, ctx.row_scale, ctx.layer)
        if ctx.rows_dtype == torch.bfloat16 and grad_x.dtype == torch.float32:
            grad_x = rounded_rows(grad_x)  # as autograd would round it, in one pass
        return grad_x, None, None, None


class GraphOps:
    """A rank's aggregations, differentiable through the exchange: the
    :class:`~supergcn.models.ops.Ops` of the full graph, one for every layer.

    * ``sum(x, row_scale)[v] = row_scale[v] * sum_{u in N(v)} x[u]`` over the global
      in-neighbours of each owned v;
    * ``mean(x)``, the sum scaled by ``1/deg(v)`` (0 for isolated v), deg global, or the
      exchange's own mean where it normalises itself (DistGNN's delayed one).

    With ``precompute_input`` the first aggregation of every pass (layer 0's, of the input
    features, which do not change) is computed exactly once and reused, so that layer 0
    exchanges nothing after the first pass (BNS-GCN's and PipeGCN's ``--use-pp``).

    A model's own normalisation and per-rank state (GCN's degrees, GAT's routes) live in its
    home and are built once per rank by :meth:`cached`; a method's exchange that takes every
    pass may give its own form of one (:attr:`~supergcn.distributed.protocol.Exchange.rank_states`).

    Args:
        operators: the rank's exact exchange and sparse operators.
        exchange: a compared method's exchange, for the passes it takes; None for none.
        precompute_input: compute layer 0's aggregation once.
    """

    def __init__(self, operators: RankOperators, exchange: Exchange | None = None,
                 precompute_input: bool = False) -> None:
        self.operators = operators
        self.exchange = exchange
        self.precompute_input = precompute_input
        self.layers_begun = 0  # aggregations of the current pass so far: the next one's layer
        self.inv_degree = inverse_degree(operators.plan.in_degree)
        self._forms = getattr(exchange, "rank_states", None) or {}
        if self._forms and not exchange.in_evaluation:
            raise ValueError("an exchange that gives its own form of a model's rank state must take the evaluation "
                             "passes too (in_evaluation): one form serves every pass")
        self._built: dict = {}
        self._input_aggregation: torch.Tensor | None = None

    def _current(self) -> Exchange:
        """The exchange of the pass under way: the method's where it takes the pass."""
        exchange = self.exchange
        if exchange is not None and (self.operators.training or exchange.in_evaluation):
            return exchange
        return self.operators

    def cached(self, state) -> Any:
        """``state.full(self)`` (a :class:`~supergcn.models.ops.RankState`), or the method's
        exchange's own form of it, built on the first call and kept: state a model derives
        from the rank's plan. The first call is collective where building is.

        Args:
            state: what to build (and the key it is kept under).

        Returns:
            What it built.
        """
        if state not in self._built:
            self._built[state] = self._forms.get(state, state.full)(self)
        return self._built[state]

    def begin_pass(self, training: bool) -> None:
        """Start a forward pass over all layers: a training pass (quantized, a method's
        exchanges where configured) or an evaluation pass (exact float32 exchanges, unless
        the method's exchange takes those too).

        Args:
            training: whether the pass trains.
        """
        self.operators.training = training
        self.operators.timer.activate()
        self.layers_begun = 0
        self._current().begin_pass()

    @property
    def exact(self) -> bool:
        """Whether this pass's aggregations are exact linear maps of their input: every
        evaluation pass; a training pass with float32 synchronous exchanges."""
        return not self.operators.training or self._current().exact

    def layer_input(self, x: torch.Tensor) -> torch.Tensor:
        """A layer's input as it is: the rank's rows are the rows aggregated.

        Args:
            x: the layer's input.

        Returns:
            ``x``.
        """
        return x

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
        current = self._current()
        if current.owns_normalisation:
            raise RuntimeError("this exchange computes its own mean; a sum cannot be asked of it")
        return _Aggregation.apply(x, current, row_scale, layer)

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
        are both (a mini-batch's block has fewer destinations than sources).

        Args:
            x: a layer's input.

        Returns:
            ``x``.
        """
        return x

    def in_degree(self) -> torch.Tensor:
        """Each owned node's number of in-neighbours in the whole graph.

        Returns:
            n float32 degrees.
        """
        return torch.from_numpy(self.operators.plan.in_degree.astype(np.float32))

    def self_loops(self) -> torch.Tensor:
        """Whether each owned node has a self loop (a local edge to itself).

        Returns:
            n booleans.
        """
        plan = self.operators.plan
        rows = np.repeat(np.arange(plan.num_owned), np.diff(plan.local_indptr))
        has_loop = np.zeros(plan.num_owned, dtype=bool)
        has_loop[rows[plan.local_indices == rows]] = True
        return torch.from_numpy(has_loop)

    def mean(self, x: torch.Tensor) -> torch.Tensor:
        """The mean aggregation (class docstring).

        Args:
            x: n x F rows of the rank's nodes.

        Returns:
            n x F aggregated rows.
        """
        current = self._current()
        if current.owns_normalisation:
            return _Aggregation.apply(x, current, None, self.next_layer())
        return self.sum(x, self.inv_degree)
