"""A stand-in for the ops a layer aggregates with (:class:`supergcn.models.ops.Ops`), for
tests that hold a model's layers to a map they can work out by hand: ``n`` rows, each its
own destination, no graph. A subclass says what its aggregation does; every other member of
the protocol is here, so that a member added to it is added once."""

from __future__ import annotations

import torch


class StandInOps:
    """The ops of ``n`` rows without a graph: the aggregation is the subclass's
    :meth:`aggregate` (the mean and the sum alike), no node has a neighbour's degree or a
    self loop, and state a model builds once is its full graph's form.

    Args:
        n: the rows.
    """

    exact = True

    def __init__(self, n: int) -> None:
        self.n = n
        self._built: dict = {}

    def aggregate(self, x: torch.Tensor) -> torch.Tensor:
        """What every aggregation is (the subclass's map)."""
        raise NotImplementedError

    def begin_pass(self, training: bool) -> None:
        """Nothing carries between passes."""

    def layer_input(self, x):
        return x

    def next_layer(self) -> int:
        return 0

    def sum(self, x: torch.Tensor, row_scale: torch.Tensor | None = None) -> torch.Tensor:
        out = self.aggregate(x)
        return out if row_scale is None else out * row_scale[:, None]

    def mean(self, x: torch.Tensor) -> torch.Tensor:
        return self.aggregate(x)

    def destinations(self, x):
        return x  # every row is a destination, as on the full graph

    def in_degree(self) -> torch.Tensor:
        return torch.zeros(self.n)

    def self_loops(self) -> torch.Tensor:
        return torch.zeros(self.n, dtype=torch.bool)

    def cached(self, state):
        if state not in self._built:
            self._built[state] = state.full(self)
        return self._built[state]
