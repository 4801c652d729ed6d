"""AdaQP's widths on one rank (its maths: :mod:`supergcn.methods.adaqp`): the traces of a
traced epoch, the assignment the solver makes from them, and the exact exchange's wire codec
that sends each row at its width."""


from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from supergcn.distributed.comm import Communicator
from supergcn.distributed.protocol import RankMethod
from supergcn.kernels.quantization import Quantized, dequantize, packed_rows, quantize
from supergcn.kernels.ranges import block_starts, concatenated_ranges
from supergcn.kernels.wire import parameters_from_wire, parameters_to_wire
from supergcn.methods.adaqp import ADAPTIVE_GROUP_SIZE, ADAPTIVE_PERIOD, ADAPTIVE_WEIGHT
from supergcn.methods.adaqp.solver import WIDTHS, Groups, solve

#: Bits of every row before the first assignment: AdaQP's initial assignment.
UNASSIGNED_BITS = 8


@dataclass(frozen=True)
class AdaptiveSettings:
    """Problem 12's lambda (``weight`` of the variance against the time), rows per message
    group, epochs between assignments (defaults: :mod:`supergcn.naming`)."""

    weight: float = ADAPTIVE_WEIGHT
    group_size: int = ADAPTIVE_GROUP_SIZE
    period: int = ADAPTIVE_PERIOD


def exchange_name(reverse: bool, layer: int) -> str:
    """``forward<l>`` or ``backward<l>``: an exchange of a training pass in the metrics."""
    return f"{'backward' if reverse else 'forward'}{layer}"


def make_groups(beta: np.ndarray, counts: np.ndarray, group_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(group of every row, group beta, group rows): each peer's rows sorted by beta,
    largest first (ties in buffer order), cut into groups of ``group_size`` rows."""
    counts = np.asarray(counts, dtype=np.int64)
    peer = np.repeat(np.arange(len(counts)), counts)
    order = np.lexsort((-beta, peer))  # by peer, then beta descending; stable
    rank_in_peer = np.arange(len(order)) - block_starts(counts)[peer[order]]
    groups_per_peer = -(-counts // group_size)
    group_of_row = np.empty(len(order), dtype=np.int64)
    group_of_row[order] = block_starts(groups_per_peer)[peer[order]] + rank_in_peer // group_size
    num_groups = int(groups_per_peer.sum())
    return (group_of_row, np.bincount(group_of_row, weights=beta, minlength=num_groups),
            np.bincount(group_of_row, minlength=num_groups))


def _width_positions(counts_by_width: np.ndarray) -> list[np.ndarray]:
    """For a buffer laid out peer by peer, each peer's widths in :data:`WIDTHS` order, with
    ``counts_by_width[w, p]`` entries of width w for peer p: the positions of width w's
    entries, in peer order."""
    starts = block_starts(counts_by_width.T.ravel()).reshape(counts_by_width.shape[::-1]).T
    return [concatenated_ranges(starts[w], counts_by_width[w]) for w in range(len(WIDTHS))]


class _Side:
    """One side of a mixed exchange: which buffer rows have each width, and where each
    width's rows and packed bytes sit on the wire."""

    def __init__(self, bits: np.ndarray, counts: np.ndarray) -> None:
        peer = np.repeat(np.arange(len(counts)), counts)
        self.bits, self.counts = bits, counts
        self.rows = [np.flatnonzero(bits == b) for b in WIDTHS]
        self.by_width = np.array([np.bincount(peer[r], minlength=len(counts)) for r in self.rows], dtype=np.int64)
        packed_by_width = np.array([packed_rows(self.by_width[w], b) for w, b in enumerate(WIDTHS)], dtype=np.int64)
        self.packed_counts = packed_by_width.sum(axis=0)
        self.row_positions = _width_positions(self.by_width)
        self.byte_positions = _width_positions(packed_by_width)


class MixedLayout:
    """Where the rows of each width sit in one exchange, on the sending and receiving side."""

    def __init__(self, send_bits: np.ndarray, send_counts: np.ndarray, recv_bits: np.ndarray,
                 recv_counts: np.ndarray) -> None:
        self.send = _Side(send_bits, send_counts)
        self.receive = _Side(recv_bits, recv_counts)

    def pack(self, rows: np.ndarray, rounding: str, seed: int, parameter_dtype: str) -> tuple[np.ndarray, np.ndarray]:
        """(packed bytes, parameters on the wire) of the send rows; ``seed`` is this
        exchange's own (each width draws from seed * 3 + its index)."""
        side = self.send
        packed = np.empty((int(side.packed_counts.sum()), rows.shape[1]), dtype=np.uint8)
        wire = None
        for w, b in enumerate(WIDTHS):
            quantized = quantize(rows[side.rows[w]], side.by_width[w], b, rounding, seed * len(WIDTHS) + w,
                                 parameter_dtype)
            packed[side.byte_positions[w]] = quantized.packed
            width_wire = parameters_to_wire(quantized, parameter_dtype)
            if wire is None:
                wire = np.empty((len(rows), 2), dtype=width_wire.dtype)
            wire[side.row_positions[w]] = width_wire
        return packed, wire

    def unpack(self, packed: np.ndarray, wire: np.ndarray, out: np.ndarray) -> np.ndarray:
        """The received rows, from what :meth:`pack` sent, in receive-buffer order."""
        side = self.receive
        zero_point, scale = parameters_from_wire(wire)
        for w, b in enumerate(WIDTHS):
            positions = side.row_positions[w]
            part = Quantized(packed[side.byte_positions[w]], zero_point[positions], scale[positions])
            out[side.rows[w]] = dequantize(part, side.by_width[w], b)
        return out


@dataclass
class _Trace:
    row_scale: torch.Tensor | None  # the destinations' scale of a forward exchange (None: 1)
    squared_range: np.ndarray       # (max - min)^2 of every row sent
    width: int


class AdaptiveBits(RankMethod):
    """One rank's assignments, traces and re-assignment (:mod:`supergcn.methods.adaqp`), and
    the wire codec of the exact exchange (:class:`~supergcn.distributed.protocol.WireCodec`).
    Exchanges are keyed ``(reverse, layer)``: a gradient exchange or not, and its layer."""

    #: The widest a row travels at: what an exchange sizes its pieces by.
    widest_bits = max(WIDTHS)

    def __init__(self, communicator: Communicator, settings: AdaptiveSettings, send_counts: np.ndarray,
                 recv_counts: np.ndarray, coefficients) -> None:
        """``coefficients(reverse, row_scale)``: the sum of squared aggregation coefficients
        of every row this rank sends in that direction (a collective)."""
        self.communicator = communicator
        self.settings = settings
        self.send_counts, self.recv_counts = send_counts, recv_counts
        self._coefficients = coefficients
        self._coefficient_cache: dict[tuple[bool, int], np.ndarray] = {}
        self.layouts: dict[tuple[bool, int], MixedLayout] = {}
        self.tracing = False
        self._traces: dict[tuple[bool, int], _Trace] = {}

    @property
    def codec(self) -> AdaptiveBits:
        """The method is the exchange's codec."""
        return self

    def layout(self, rows: np.ndarray, reverse: bool, layer: int, row_scale: torch.Tensor | None):
        """The wire layout of a training exchange's ``rows``, traced where the epoch traces:
        its assignment, or :data:`UNASSIGNED_BITS` for every row before the first.

        Args:
            rows: the rows this rank sends.
            reverse: whether they are gradients.
            layer: the exchange's layer.
            row_scale: the destinations' scale of a forward exchange (None: 1).

        Returns:
            A :class:`MixedLayout`, or the bits of every row.
        """
        key = (reverse, layer)
        self.trace(key, rows, row_scale)
        return self.layouts.get(key, UNASSIGNED_BITS)

    def end_epoch(self) -> dict:
        """After a traced epoch, the re-assignment (collective; outside the epoch's time and
        bytes) and, on rank 0, its record: its wall time and, per exchange, rows per width,
        solver objective and seconds.

        Returns:
            ``{"bit_assignment": {"seconds": ..., "exchanges": ...}}`` on rank 0 after a
            traced epoch; empty otherwise.
        """
        if not self.tracing:
            return {}
        started = time.perf_counter()
        exchanges = self.reassign()
        seconds = time.perf_counter() - started
        return {"bit_assignment": {"seconds": seconds, "exchanges": exchanges}} if self.communicator.rank == 0 else {}

    def begin_epoch(self, epoch: int, last_epoch: int) -> bool:
        """Trace ``epoch`` (1-based) if an assignment follows it: epochs 1, 1 + period, ...,
        but not the last, whose assignment nothing would use. Returns whether it traces."""
        self.tracing = (epoch - 1) % self.settings.period == 0 and epoch < last_epoch
        return self.tracing

    def trace(self, key: tuple[bool, int], rows: np.ndarray, row_scale: torch.Tensor | None) -> None:
        if self.tracing:
            spans = (rows.max(axis=1) - rows.min(axis=1)).astype(np.float64) if rows.shape[1] else np.zeros(len(rows))
            self._traces[key] = _Trace(row_scale, spans**2, rows.shape[1])

    def reassign(self) -> dict:
        """Solve every traced exchange's assignment (collective); returns, on rank 0, per
        exchange the rows assigned each width, the rows whose values were all equal (no
        variance at any width: they go at 2 bits), the solver's objective, relative gap
        and seconds."""
        comm = self.communicator.comm
        report = {}
        for key in sorted(self._traces):
            reverse, _ = key
            trace = self._traces[key]
            send_counts, recv_counts = self._counts(reverse)
            if key not in self._coefficient_cache:
                self._coefficient_cache[key] = self._coefficients(reverse, trace.row_scale)
            beta = self._coefficient_cache[key] * trace.width * trace.squared_range / 6
            group_of_row, group_beta, group_rows = make_groups(beta, send_counts, self.settings.group_size)
            gathered = comm.gather((group_beta, group_rows, int((beta == 0).sum())), root=0)
            widths_per_rank = None
            if self.communicator.rank == 0:
                sizes = [len(g[0]) for g in gathered]
                groups = Groups(np.concatenate([g[0] for g in gathered]), np.concatenate([g[1] for g in gathered]),
                                np.repeat(np.arange(len(gathered)), sizes), trace.width)
                assignment = solve(groups, self.settings.weight, len(gathered))
                widths_per_rank = np.split(assignment.bits, np.cumsum(sizes)[:-1])
                report[exchange_name(*key)] = {
                    "rows_per_bits": {str(b): int(groups.rows[assignment.bits == b].sum()) for b in WIDTHS},
                    "rows_without_spread": sum(g[2] for g in gathered), "groups": len(groups.beta),
                    "objective": assignment.objective, "solver_gap": assignment.gap,
                    "solve_seconds": assignment.seconds}
            send_bits = comm.scatter(widths_per_rank, root=0)[group_of_row].astype(np.uint8)
            recv_bits = self.communicator.ialltoallv(send_bits[:, None].copy(), send_counts,
                                                     recv_counts).wait()[:, 0]
            self.layouts[key] = MixedLayout(send_bits, send_counts, recv_bits, recv_counts)
        self._traces.clear()
        return report

    def _counts(self, reverse: bool) -> tuple[np.ndarray, np.ndarray]:
        send, recv = self.send_counts, self.recv_counts
        return (recv, send) if reverse else (send, recv)

    def state(self) -> dict:
        """The assignments, for a checkpoint."""
        return {key: (layout.send.bits, layout.receive.bits) for key, layout in self.layouts.items()}

    def restore(self, state: dict) -> None:
        self.layouts = {key: MixedLayout(send_bits, self._counts(key[0])[0], recv_bits, self._counts(key[0])[1])
                        for key, (send_bits, recv_bits) in state.items()}


def build(context) -> AdaptiveBits:
    """The rank's widths, with the run's lambda, group size and period.

    Args:
        context: the rank's :class:`~supergcn.train.steps.RankContext`.

    Returns:
        The method's state on this rank.
    """
    config, operators = context.config, context.operators
    settings = AdaptiveSettings(config.adaptive_weight, config.adaptive_group_size, config.adaptive_period)
    return AdaptiveBits(context.communicator, settings, operators.send_counts, operators.recv_counts,
                        operators.coefficients)
