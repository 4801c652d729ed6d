"""AdaQP's adaptive bit widths (Wan et al., MLSys '23) on our exchanges: ``--bits adaptive``.

Every exchange of a training pass (``forward<l>`` and ``backward<l>`` for layer l) has
its own assignment of 2, 4 or 8 bits to each row it sends:

1. Trace. In a traced epoch every rank records, for each row it sends, the value range
   (max - min) of the row; with the row's aggregation coefficients alpha (the row scale
   of every destination it reaches, told by the receiver once: forward rows reach
   destinations v scaled by D_v; gradient rows reach their sources unscaled) its
   variance weight is beta_k = sum_v alpha_{v,k}^2 * width * (max_k - min_k)^2 / 6
   (AdaQP §4.2, Theorem 1; AdaQP's code squares the sum of the alphas instead, we keep
   the paper's sum of squares, the variance of the aggregated values).
2. Group. Each rank sorts its rows for each peer by beta, largest first, and cuts them
   into groups of ``group_size`` rows (AdaQP's grouping); a group's beta is the sum.
3. Solve. Rank 0 gathers every rank's groups and solves Problem 12 for each exchange
   (:mod:`supergcn.distributed.bit_assignment`, HiGHS), then scatters the widths.
4. Tell. Every sender expands its groups' widths to its rows and sends each receiver the
   width of every row it will receive (one byte per row, once per assignment).

Traced epochs are epoch 1 and every ``period``-th epoch after it; the assignment made at
the end of a traced epoch holds from the next epoch on. Before the first assignment every
row travels at 8 bits, AdaQP's initial assignment. (AdaQP first assigns after ``period``
epochs at 8 bits, from traces summed over them; we assign after the first epoch, so that
short runs are assigned at all.)

Wire layout. Rows are quantized per width with the rounding chosen for the run
(:func:`supergcn.kernels.quantization.quantize`, AdaQP rounds stochastically) and each
peer's chunk holds its 2-bit, then 4-bit, then 8-bit rows, each block packed and padded
to whole bytes as a uniform exchange is; the (zero point, scale) pairs follow the same
row order in the second message.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from supergcn.distributed.bit_assignment import WIDTHS, Groups, solve
from supergcn.distributed.comm import Communicator
from supergcn.kernels.quantization import Quantized, dequantize, packed_rows, quantize
from supergcn.kernels.wire import parameters_from_wire, parameters_to_wire


@dataclass(frozen=True)
class AdaptiveSettings:
    """Problem 12's lambda (``weight`` of the variance against the time), AdaQP's default
    0.5; rows per message group; epochs between assignments (AdaQP's best: 50)."""

    weight: float = 0.5
    group_size: int = 100
    period: int = 50


def peer_of_rows(counts: np.ndarray) -> np.ndarray:
    """The peer of every row of a buffer of peer blocks of ``counts`` rows."""
    return np.repeat(np.arange(len(counts)), counts)


def make_groups(beta: np.ndarray, counts: np.ndarray, group_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                                 np.ndarray]:
    """(group of every row, group beta, group rows, group peer): each peer's rows sorted by
    beta, largest first (ties in buffer order), cut into groups of ``group_size`` rows."""
    peer = peer_of_rows(counts)
    order = np.lexsort((-beta, peer))  # by peer, then beta descending; stable
    block_start = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    rank_in_peer = np.arange(len(order)) - block_start[peer[order]]
    groups_before = np.concatenate([[0], np.cumsum(-(-np.asarray(counts) // group_size))[:-1]]).astype(np.int64)
    group_of_row = np.empty(len(order), dtype=np.int64)
    group_of_row[order] = groups_before[peer[order]] + rank_in_peer // group_size
    num_groups = int(-(-np.asarray(counts, dtype=np.int64) // group_size).sum())
    group_beta = np.bincount(group_of_row, weights=beta, minlength=num_groups)
    group_rows = np.bincount(group_of_row, minlength=num_groups)
    group_peer = np.repeat(np.arange(len(counts)), -(-np.asarray(counts, dtype=np.int64) // group_size))
    return group_of_row, group_beta, group_rows, group_peer


def _block_positions(counts_by_width: np.ndarray) -> list[np.ndarray]:
    """For a buffer laid out peer by peer, each peer's widths in :data:`WIDTHS` order, with
    ``counts_by_width[w, p]`` entries of width w for peer p: the positions of width w's
    entries, in peer order."""
    sizes = counts_by_width.T.ravel()  # peer-major, then width
    start = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64).reshape(counts_by_width.shape[::-1]).T
    return [np.concatenate([np.arange(s, s + n) for s, n in zip(start[w], counts_by_width[w])] or [np.empty(0)])
            .astype(np.int64) for w in range(len(WIDTHS))]


class MixedLayout:
    """Where the rows of each width sit in one exchange, on the sending and receiving side."""

    def __init__(self, send_bits: np.ndarray, send_counts: np.ndarray, recv_bits: np.ndarray,
                 recv_counts: np.ndarray) -> None:
        self.send_bits, self.recv_bits = send_bits, recv_bits
        self.send_counts, self.recv_counts = send_counts, recv_counts
        self.send_rows, self.send_by_width = self._side(send_bits, send_counts)
        self.recv_rows, self.recv_by_width = self._side(recv_bits, recv_counts)

    @staticmethod
    def _side(bits: np.ndarray, counts: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        peer = peer_of_rows(counts)
        rows = [np.flatnonzero(bits == b) for b in WIDTHS]
        by_width = np.array([np.bincount(peer[r], minlength=len(counts)) for r in rows], dtype=np.int64)
        return rows, by_width

    def packed_counts(self, by_width: np.ndarray) -> np.ndarray:
        """Packed byte rows per width (rows of the result) and peer (columns)."""
        return np.array([packed_rows(by_width[w], b) for w, b in enumerate(WIDTHS)], dtype=np.int64)

    def pack(self, rows: np.ndarray, rounding: str, seed: int, parameter_dtype: str
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(packed bytes, packed byte rows per peer, parameters on the wire) of the send rows."""
        packed_by_width = self.packed_counts(self.send_by_width)
        packed = np.empty((int(packed_by_width.sum()), rows.shape[1]), dtype=np.uint8)
        wire = None
        byte_positions = _block_positions(packed_by_width)
        row_positions = _block_positions(self.send_by_width)
        for w, b in enumerate(WIDTHS):
            quantized = quantize(rows[self.send_rows[w]], self.send_by_width[w], b, rounding, seed + b,
                                 parameter_dtype)
            packed[byte_positions[w]] = quantized.packed
            width_wire = parameters_to_wire(quantized, parameter_dtype)
            if wire is None:
                wire = np.empty((len(rows), 2), dtype=width_wire.dtype)
            wire[row_positions[w]] = width_wire
        return packed, packed_by_width.sum(axis=0), wire

    def unpack(self, packed: np.ndarray, wire: np.ndarray, out: np.ndarray) -> np.ndarray:
        """The received rows, from what :meth:`pack` sent, in receive-buffer order."""
        byte_positions = _block_positions(self.packed_counts(self.recv_by_width))
        row_positions = _block_positions(self.recv_by_width)
        zero_point, scale = parameters_from_wire(wire)
        for w, b in enumerate(WIDTHS):
            rows = self.recv_by_width[w]
            part = Quantized(packed[byte_positions[w]], zero_point[row_positions[w]], scale[row_positions[w]])
            out[self.recv_rows[w]] = dequantize(part, rows, b)
        return out

    def received_packed_counts(self) -> np.ndarray:
        return self.packed_counts(self.recv_by_width).sum(axis=0)


@dataclass
class _Trace:
    reverse: bool                 # a gradient (backward) exchange
    row_scale: object             # the destinations' scale of a forward exchange (None: 1)
    squared_range: np.ndarray     # (max - min)^2 of every row sent
    width: int


class AdaptiveBits:
    """One rank's assignments, traces and re-assignment (module docstring)."""

    def __init__(self, communicator: Communicator, settings: AdaptiveSettings, send_counts: np.ndarray,
                 recv_counts: np.ndarray) -> None:
        self.communicator = communicator
        self.settings = settings
        self.send_counts, self.recv_counts = send_counts, recv_counts
        self.layouts: dict[str, MixedLayout] = {}
        self.tracing = False
        self._traces: dict[str, _Trace] = {}

    def traced_epoch(self, epoch: int) -> bool:
        """Whether ``epoch`` (1-based) is traced and followed by a re-assignment."""
        return (epoch - 1) % self.settings.period == 0

    def trace(self, slot: str, rows: np.ndarray, reverse: bool, row_scale) -> None:
        if self.tracing:
            spans = (rows.max(axis=1) - rows.min(axis=1)).astype(np.float64) if rows.shape[1] else np.zeros(len(rows))
            self._traces[slot] = _Trace(reverse, row_scale, spans**2, rows.shape[1])

    def reassign(self, coefficients) -> dict:
        """Solve every traced exchange's assignment (collective); returns, on rank 0, per
        exchange the rows assigned each width, the rows whose values were all equal (no
        variance at any width: they go at 2 bits), the solver's objective and seconds.
        ``coefficients(reverse, row_scale)`` gives the sum of squared coefficients of
        every row this rank sends in that direction (collective)."""
        comm = self.communicator.comm
        report = {}
        for slot in sorted(self._traces):
            trace = self._traces[slot]
            send_counts, recv_counts = self._counts(trace.reverse)
            beta = coefficients(trace.reverse, trace.row_scale) * trace.width * trace.squared_range / 6
            group_of_row, group_beta, group_rows, _ = make_groups(beta, send_counts, self.settings.group_size)
            gathered = comm.gather((group_beta, group_rows, int((beta == 0).sum())), root=0)
            widths_per_rank = None
            if self.communicator.rank == 0:
                groups = Groups(np.concatenate([g[0] for g in gathered]), np.concatenate([g[1] for g in gathered]),
                                np.repeat(np.arange(len(gathered)), [len(g[0]) for g in gathered]), trace.width)
                assignment = solve(groups, self.settings.weight, len(gathered))
                widths_per_rank = np.split(assignment.bits, np.cumsum([len(g[0]) for g in gathered])[:-1])
                report[slot] = {"rows_per_bits": {str(b): int(groups.rows[assignment.bits == b].sum()) for b in WIDTHS},
                                "rows_without_spread": sum(g[2] for g in gathered),
                                "groups": len(groups.beta), "objective": assignment.objective,
                                "solve_seconds": assignment.seconds}
            send_bits = comm.scatter(widths_per_rank, root=0)[group_of_row].astype(np.uint8)
            recv_bits = self.communicator.ialltoallv(send_bits[:, None].copy(), send_counts,
                                                     recv_counts).wait()[:, 0]
            self.layouts[slot] = MixedLayout(send_bits, send_counts, recv_bits, recv_counts)
        self._traces.clear()
        return report

    def _counts(self, reverse: bool) -> tuple[np.ndarray, np.ndarray]:
        send, recv = self.send_counts, self.recv_counts
        return (recv, send) if reverse else (send, recv)

    def state(self) -> dict:
        """The assignments, for a checkpoint."""
        return {slot: (layout.send_bits, layout.recv_bits) for slot, layout in self.layouts.items()}

    def restore(self, state: dict) -> None:
        self.layouts = {}
        for slot, (send_bits, recv_bits) in state.items():
            send_counts, recv_counts = self._counts(slot.startswith("backward"))
            self.layouts[slot] = MixedLayout(send_bits, send_counts, recv_bits, recv_counts)
