"""What a compared method plugs into one rank's runtime: one protocol, whatever the method.

A method's card (:mod:`supergcn.methods`) builds, on every rank, a :class:`RankMethod`.
The runtime asks it for up to three pieces and calls each where it applies, naming no
method:

* ``exchange`` (an :class:`Exchange`): the per-layer aggregation through the boundary,
  forward and backward, in place of the rank's exact one
  (:class:`~supergcn.distributed.rank_operators.RankOperators`, itself an
  :class:`Exchange`). :class:`~supergcn.distributed.graph_ops.GraphOps` holds it in one slot
  and hands it the passes it takes: training passes, and evaluation passes too where
  ``in_evaluation``. Its flags tell the runtime what it needs to know: whether a training
  pass's aggregation is ``exact`` (a linear map of its input: the first layer's input may
  then be aggregated factored, :mod:`supergcn.models.inputs`), and whether it
  ``owns_normalisation`` (DistGNN's mean divides by the degree of what arrived: the mean
  is asked of it without a row scale); and, for an exchange that takes every pass, its own
  forms of the per-rank states a model aggregates with (``rank_states``: SAR's sequential
  softmax for GAT's attention), built by ``GraphOps.cached`` in place of the model's;
* ``codec`` (a :class:`WireCodec`): how the exact exchange's rows travel while training
  where their precision is not one width for all (AdaQP's widths per message group);
* ``step``: a training epoch of its own (``run(epoch) -> global loss``), in place of the
  full-batch step (DistGNN-MB's mini-batches).

Around the epochs it gets :meth:`RankMethod.begin_epoch` and :meth:`RankMethod.end_epoch`
(whose entries join the epoch's metrics line), :meth:`RankMethod.header` (an entry of the
metrics header), :meth:`RankMethod.state` and :meth:`RankMethod.restore` (its part of a
checkpoint) and :meth:`RankMethod.close` (before MPI shuts down). Which bits it takes,
which models, plans and options, is its card's.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import torch


class Exchange(Protocol):
    """A layer's aggregation through the boundary: ``forward(x, row_scale, layer)`` gives
    ``diag(row_scale) A x`` of the rank's rows (its exchange's version of it), ``backward``
    the transpose of that map for the same ``row_scale`` and ``layer``, ``layer`` counting
    the pass's aggregations from 0."""

    #: It replaces the exact exchange in evaluation passes too.
    in_evaluation: bool
    #: A training pass's aggregation is an exact linear map of its input.
    exact: bool
    #: It normalises the mean itself: the mean is asked of it without a row scale.
    owns_normalisation: bool
    #: Optional: its own forms of models' per-rank states (a model's
    #: :class:`~supergcn.models.ops.RankState` -> ``(ops) -> state``), for an exchange that takes
    #: every pass (``in_evaluation``); absent or empty where it has none.
    rank_states: dict

    def begin_pass(self) -> None:
        """A forward pass over all layers begins (collective where the exchange draws)."""

    def forward(self, x: torch.Tensor, row_scale: torch.Tensor | None, layer: int) -> torch.Tensor:
        """The aggregation of ``x`` (n x F rows of the rank), n x F out."""

    def backward(self, grad: torch.Tensor, row_scale: torch.Tensor | None, layer: int) -> torch.Tensor:
        """The gradient of the aggregation's input from that of its output."""


class WireCodec(Protocol):
    """How the rows of a training exchange travel where their precision varies by row."""

    #: The widest precision a row may travel at, in bits (what the exchange sizes its pieces by).
    widest_bits: int

    def layout(self, rows: np.ndarray, reverse: bool, layer: int, row_scale: torch.Tensor | None) -> Any:
        """The wire layout of one exchange's ``rows``: a uniform width in bits (an int), or a
        layout that packs and unpacks rows of several widths (``pack(rows, rounding, seed,
        parameter_dtype)``, ``unpack(packed, wire, out)`` and the packed and row counts of its
        ``send`` and ``receive`` sides)."""


class RankMethod:
    """One rank's state of a compared method (module docstring): every piece absent and
    every hook a no-op unless the method's class says otherwise."""

    #: The aggregation's exchange in place of the exact one, or None.
    exchange: Exchange | None = None
    #: The exact exchange's wire codec while training, or None.
    codec: WireCodec | None = None
    #: A training epoch in place of the full-batch one (``run(epoch) -> float``), or None.
    step: Any = None

    def begin_epoch(self, epoch: int, last_epoch: int) -> None:
        """Training epoch ``epoch`` (1-based) of ``last_epoch`` begins."""

    def end_epoch(self) -> dict:
        """The epoch's own entries of its metrics line, after its evaluation (collective:
        rank 0 gets them, the others an empty dict).

        Returns:
            Entry name -> record.
        """
        return {}

    def header(self) -> dict | None:
        """The method's entry of the metrics header (collective: rank 0 gets it).

        Returns:
            The entry on rank 0, None elsewhere or where the method has none.
        """
        return None

    def state(self) -> Any:
        """What a checkpoint keeps of the method to continue exactly.

        Returns:
            Picklable state; None where nothing carries from one epoch to the next.
        """
        return None

    def restore(self, state: Any) -> None:
        """Continue from :meth:`state`'s result.

        Args:
            state: what :meth:`state` returned on this rank.
        """

    def close(self) -> None:
        """Wait for what is still in flight, before MPI is shut down."""
