"""What a layer aggregates with: the :class:`Ops` of a rank (or of a mini-batch's block).

Every layer (:mod:`supergcn.models`) takes its input and an ``Ops``, and asks it for the
aggregations its formula needs; the stack (:class:`~supergcn.train.gnn.GNN`) hands each
layer its own, so that one forward serves the full graph
(:class:`~supergcn.distributed.graph_ops.GraphOps`, one for every layer) and a mini-batch
(:class:`~supergcn.methods.distgnn_mb.blocks.BlockOps`, one per layer's block). A model
whose aggregation needs state of its own, built once (GCN's normalisation, GAT's attention
across ranks), declares it as a :class:`RankState`, with the form it takes on a block where
it has one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, runtime_checkable

import torch


@dataclass(frozen=True)
class RankState:
    """State a model builds once from the ops it aggregates with (:meth:`Ops.cached`).

    Args:
        full: ``(ops) -> state`` over the rank's full graph (collective where it exchanges).
        block: ``(block ops) -> state`` over a mini-batch's block, or None where the model
            has no block form (a block's degrees are not the graph's: GCN's normalisation).
    """

    full: Callable[[Any], Any]
    block: Callable[[Any], Any] | None = None


@runtime_checkable
class Ops(Protocol):
    """The aggregations a layer calls, and what it may ask of the rows they run on."""

    #: Whether this pass's aggregations are exact linear maps of their input (float32,
    #: synchronous exchanges): the first layer may then aggregate its input factored.
    exact: bool

    def begin_pass(self, training: bool) -> None:
        """A forward pass over all layers begins: a training or an evaluation pass."""

    def layer_input(self, x: torch.Tensor) -> torch.Tensor:
        """A layer's input rows as its aggregations read them (a block's: with its halo rows)."""

    def next_layer(self) -> int:
        """The layer of the next aggregation (0 for the pass's first)."""

    def sum(self, x: torch.Tensor, row_scale: torch.Tensor | None = None) -> torch.Tensor:
        """``row_scale[v] · Σ_{u ∈ N(v)} x[u]`` for every destination v; differentiable."""

    def mean(self, x: torch.Tensor) -> torch.Tensor:
        """The mean over each destination's neighbours (0 for none); differentiable."""

    def destinations(self, x) -> torch.Tensor:
        """The destinations' own rows of a layer's input (the root term)."""

    def in_degree(self) -> torch.Tensor:
        """Each destination's number of in-neighbours in the whole graph (float32)."""

    def self_loops(self) -> torch.Tensor:
        """Whether each destination has a self loop in the graph (bool)."""

    def cached(self, state: RankState) -> Any:
        """``state``'s value on these ops, built at the first call and kept."""
