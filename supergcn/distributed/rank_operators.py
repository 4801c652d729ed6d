"""One rank's boundary exchange and the operators around it (SuperGCN §5, Fig. 5).

For rank i with owned features X_i (n_i x F), the aggregation over the global graph
restricted to rank i's destinations is

    Y_i = D_i (L_i X_i + R_i B_i),      B_i = concat_j S_j X_j   (rows addressed to i),

with L the local CSR, S the send operator (one row per send-buffer row: a PRE partial
sum or a single POST source, see :mod:`supergcn.plan.rank_plan`), R the post-aggregation
CSR over the receive buffer B, and D a diagonal row scale (1/deg for the mean). Forward:
S X, exchange (Alltoallv, started before L X and awaited after it, so the local
aggregation overlaps the transfer), L X, then D (· + R B). While training, exchanged rows
may be quantized (:class:`ExchangeSettings`). Backward is the transpose: with G = dL/dY,

    dL/dX_i = L_i^T (D_i G_i) + S_i^T H_i,     H = exchange^T(R^T D G)

(the same Alltoallv with send and receive counts swapped). The operators are an
:class:`~supergcn.distributed.protocol.Exchange`, the exact one; a compared method's
exchange that keeps this shape with operators or an exchange of its own (PipeGCN's stale
rows, BNS-GCN's sampled ones) runs it through :meth:`RankOperators.through` and
:meth:`RankOperators.through_transposed`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from supergcn.distributed.buffers import BufferPool
from supergcn.distributed.comm import Communicator, polls_to_finish
from supergcn.distributed.operators import SparseOperator
from supergcn.distributed.protocol import WireCodec
from supergcn.distributed.ranks import stream_seed
from supergcn.distributed.timing import PhaseTimer
from supergcn.kernels.quantization import Quantized, packed_rows
from supergcn.kernels.rounding import scaled_rounded
from supergcn.kernels.wire import dequantize_from_wire, from_bfloat16, quantize_to_wire, to_bfloat16
from supergcn.naming import DEFAULT_PARAMETER_DTYPE
from supergcn.plan.rank_plan import RankPlan

#: The most pieces an overlapped local product is cut into (each costs a parallel launch
#: and an MPI poll, some tens of microseconds).
MAX_PIECES = 64


@dataclass(frozen=True)
class ExchangeSettings:
    """How boundary rows travel while training (evaluation always exchanges float32).

    ``bits`` < 32 quantizes every exchanged row, embeddings forward and gradients
    backward (:mod:`supergcn.kernels.quantization`); bits that are not a number leave each
    row's width to the operators' wire codec (:attr:`RankOperators.codec`: AdaQP's widths);
    ``overlap`` starts the exchange before the local aggregation and waits for it afterwards;
    ``bfloat16_gradients`` rounds the gradients the transposed products read to bfloat16,
    once, after the mean's scale (a bf16 run, :mod:`supergcn.train.precision`).
    """

    bits: int | str = 32
    rounding: str = "nearest"
    overlap: bool = True
    parameter_dtype: str = DEFAULT_PARAMETER_DTYPE
    seed: int = 0
    bfloat16_gradients: bool = False


class InFlight:
    """One boundary exchange in flight: :meth:`poll` while other work runs, then :meth:`finish`."""

    def __init__(self, pending: list, finish) -> None:
        self._pending = pending
        self._finish = finish

    def poll(self) -> None:
        for request in self._pending:
            request.test()

    def finish(self) -> torch.Tensor:
        """Wait; the rows received, valid until the next exchange starts (a pooled buffer)."""
        return self._finish()


class RankOperators:
    """Everything one rank needs to aggregate: its plan's operators and exchange counts; the
    exact :class:`~supergcn.distributed.protocol.Exchange`."""

    in_evaluation = True  # the exchange of every evaluation pass
    owns_normalisation = False

    def __init__(self, plan: RankPlan, communicator: Communicator, timer: PhaseTimer, kernel: str = "numba",
                 settings: ExchangeSettings = ExchangeSettings()) -> None:
        self.plan = plan
        self.communicator = communicator
        self.timer = timer
        self.settings = settings
        matrices = plan.matrices()
        self.local = SparseOperator(matrices["local"], kernel)
        self.send = SparseOperator(matrices["send"], kernel)
        self.remote = SparseOperator(matrices["remote"], kernel)
        self.send_counts = plan.send_counts
        self.recv_counts = plan.recv_counts
        self._exchange_rows = int(max(self.send_counts.sum(), self.recv_counts.sum()))
        self.buffers = BufferPool()
        self.training = False       # quantize only while training
        self.quantize_calls = 0     # position in the stochastic-rounding stream (checkpointed)
        self._in_flight = False
        self._send_sources = np.diff(matrices["send"].indptr).astype(np.float32)[:, None]
        # How rows of several widths travel while training (a method's, handed in): None for one width.
        self.codec: WireCodec | None = None

    @property
    def exact(self) -> bool:
        """Whether a training pass's aggregation is exact: float32 rows."""
        return self.settings.bits == 32

    def begin_pass(self) -> None:
        """Nothing carries from one pass to the next."""

    def _buffer(self, role: str, rows: int, like: torch.Tensor, bfloat16: bool = False) -> torch.Tensor:
        if bfloat16:  # numpy has no bfloat16: its bits, pooled as int16
            return torch.from_numpy(self.buffers.array(role, (rows, like.shape[1]), np.int16)).view(torch.bfloat16)
        return torch.from_numpy(self.buffers.array(role, (rows, like.shape[1]), np.float32))

    def start_exchange(self, rows: torch.Tensor, reverse: bool = False, layer: int = 0,
                       row_scale: torch.Tensor | None = None) -> InFlight:
        """Start sending ``rows``; the exchange's :meth:`~InFlight.finish` waits and returns
        the rows received. Its buffers are reused by the next exchange, so finish one
        before starting another. The ``layer`` and the destinations' ``row_scale`` are
        what a wire codec (:attr:`codec`) needs to know of the exchange."""
        if self._in_flight:
            raise RuntimeError("an exchange is still in flight: finish it before starting another")
        send_counts, recv_counts = ((self.recv_counts, self.send_counts) if reverse
                                    else (self.send_counts, self.recv_counts))
        rows = rows.contiguous().numpy()
        bits = self.settings.bits
        self._in_flight = True
        if not self.training or bits == 32:
            return self._exchange_float32(rows, send_counts, recv_counts)
        if bits == 16:
            return self._exchange_bfloat16(rows, send_counts, recv_counts)
        if self.codec is None:
            return self._exchange_quantized(rows, send_counts, recv_counts, bits)
        layout = self.codec.layout(rows, reverse, layer, row_scale)
        if isinstance(layout, int):  # one width for every row
            return self._exchange_quantized(rows, send_counts, recv_counts, layout)
        return self._exchange_mixed(rows, layout)

    def _next_seed(self) -> int:
        """The seed of this rank's next quantization (its stochastic-rounding stream)."""
        self.quantize_calls += 1
        return stream_seed(self.settings.seed, self.communicator.rank, self.quantize_calls - 1)

    def _exchange_float32(self, rows: np.ndarray, send_counts: np.ndarray, recv_counts: np.ndarray) -> InFlight:
        with self.timer.phase("communication"):
            pending = self.communicator.ialltoallv(
                rows, send_counts, recv_counts,
                out=self.buffers.array("received", (int(recv_counts.sum()), rows.shape[1]), rows.dtype))

        def finish():
            self._in_flight = False
            with self.timer.phase("communication"):
                return torch.from_numpy(pending.wait())
        return InFlight([pending], finish)

    def _exchange_bfloat16(self, rows: np.ndarray, send_counts: np.ndarray, recv_counts: np.ndarray) -> InFlight:
        """The rows as bfloat16 (:func:`~supergcn.kernels.wire.to_bfloat16`), one message of
        half float32's bytes; the conversions are booked as quantization, as an Int2
        exchange's packing is."""
        with self.timer.phase("quantization"):
            wire = to_bfloat16(rows, self.buffers.array("bfloat16", rows.shape, np.uint16))
        with self.timer.phase("communication"):
            pending = self.communicator.ialltoallv(
                wire, send_counts, recv_counts,
                out=self.buffers.array("bfloat16 received", (int(recv_counts.sum()), rows.shape[1]), np.uint16))

        def finish():
            self._in_flight = False
            with self.timer.phase("communication"):
                received = pending.wait()
            with self.timer.phase("quantization"):
                out = self.buffers.array("received", received.shape, np.float32)
                return torch.from_numpy(from_bfloat16(received, out))
        return InFlight([pending], finish)

    def _exchange_quantized(self, rows: np.ndarray, send_counts: np.ndarray, recv_counts: np.ndarray,
                            bits: int) -> InFlight:
        width = rows.shape[1]
        with self.timer.phase("quantization"):
            packed_shape = (int(packed_rows(send_counts, bits).sum()), width)
            quantized, wire = quantize_to_wire(
                rows, send_counts, bits, self.settings.rounding, self._next_seed(), self.settings.parameter_dtype,
                out=Quantized(self.buffers.array("packed", packed_shape, np.uint8),
                              self.buffers.array("zero points", (len(rows),), np.float32),
                              self.buffers.array("scales", (len(rows),), np.float32)))
        with self.timer.phase("communication"):
            received_packed = self.buffers.array("packed received",
                                                 (int(packed_rows(recv_counts, bits).sum()), width), np.uint8)
            data = self.communicator.ialltoallv(quantized.packed, packed_rows(send_counts, bits),
                                                packed_rows(recv_counts, bits), out=received_packed)
            parameters = self.communicator.ialltoallv(wire, send_counts, recv_counts, kind="params")

        def finish():
            self._in_flight = False
            with self.timer.phase("communication"):
                packed, wire_received = data.wait(), parameters.wait()
            with self.timer.phase("quantization"):
                out = self.buffers.array("received", (int(recv_counts.sum()), width), np.float32)
                return torch.from_numpy(dequantize_from_wire(packed, wire_received, recv_counts, bits, out))
        return InFlight([data, parameters], finish)

    def _exchange_mixed(self, rows: np.ndarray, layout) -> InFlight:
        with self.timer.phase("quantization"):
            packed, wire = layout.pack(rows, self.settings.rounding, self._next_seed(), self.settings.parameter_dtype)
        with self.timer.phase("communication"):
            data = self.communicator.ialltoallv(packed, layout.send.packed_counts, layout.receive.packed_counts)
            parameters = self.communicator.ialltoallv(wire, layout.send.counts, layout.receive.counts, kind="params")

        def finish():
            self._in_flight = False
            with self.timer.phase("communication"):
                packed_received, wire_received = data.wait(), parameters.wait()
            with self.timer.phase("quantization"):
                out = self.buffers.array("received", (int(layout.receive.counts.sum()), rows.shape[1]), np.float32)
                return torch.from_numpy(layout.unpack(packed_received, wire_received, out))
        return InFlight([data, parameters], finish)

    def coefficients(self, reverse: bool, row_scale: torch.Tensor | None) -> np.ndarray:
        """Sum of squared aggregation coefficients of every row this rank sends forward
        (``reverse`` False: the destinations' squared scales, summed by their receiver) or
        backward (the forward row's number of sources, told by its sender; DistGNN's share of
        the degree a received row brings). Collective."""
        if not reverse:
            scale = torch.ones(self.plan.num_owned) if row_scale is None else row_scale
            at_receiver = self.remote.t_matmul((scale.float() ** 2)[:, None].contiguous()).numpy()
            told = self.communicator.ialltoallv(at_receiver, self.recv_counts, self.send_counts)
        else:
            told = self.communicator.ialltoallv(self._send_sources, self.send_counts, self.recv_counts)
        return told.wait()[:, 0].astype(np.float64)

    def local_beside(self, exchange: InFlight, x: torch.Tensor, **product) -> tuple[torch.Tensor, torch.Tensor]:
        """(the local product of ``x``, the exchange's rows): the product runs while the
        exchange is in flight and polls it between pieces (see :mod:`supergcn.distributed.comm`);
        without overlap the exchange completes first."""
        if not self.settings.overlap:
            received = exchange.finish()
            with self.timer.phase("aggregation"):
                return self.local.matmul(x, **product), received
        with self.timer.phase("aggregation"):
            out = self.local.matmul(x, pieces=self.pieces_beside(x.shape[1]), between=exchange.poll, **product)
        return out, exchange.finish()

    def pieces_beside(self, width: int) -> int:
        """How many pieces to cut local work into beside an exchange of ``width``-wide rows:
        as many as it takes polls to finish (:func:`~supergcn.distributed.comm.polls_to_finish`)."""
        bits = self.settings.bits if self.training else 32
        if self.codec is not None and bits != 32:
            bits = self.codec.widest_bits
        wire_bytes = self._exchange_rows * width * bits // 8  # the larger direction, either way round
        return max(1, min(MAX_PIECES, polls_to_finish(wire_bytes)))

    def forward(self, x: torch.Tensor, row_scale: torch.Tensor | None, layer: int) -> torch.Tensor:
        """The aggregation of ``x``, the ``layer``-th of the pass (what a wire codec keys on)."""
        return self.through(x, lambda rows: self.start_exchange(rows, layer=layer, row_scale=row_scale), self.send,
                            self.remote, row_scale, send_out=self._buffer("send", self.send.shape[0], x))

    def backward(self, grad: torch.Tensor, row_scale: torch.Tensor | None, layer: int) -> torch.Tensor:
        """The gradient of the ``layer``-th aggregation's input."""
        return self.through_transposed(grad, lambda rows: self.start_exchange(rows, reverse=True, layer=layer),
                                       self.send, self.remote, row_scale, buffered=True)

    def through(self, x: torch.Tensor, start, send: SparseOperator, remote: SparseOperator,
                row_scale: torch.Tensor | None, send_out: torch.Tensor | None = None,
                sent_scale: torch.Tensor | None = None) -> torch.Tensor:
        """``D (L x + R B)``, ``B`` what ``start(S x)`` brings (module docstring): the rows to
        send, the exchange started, the local product beside it (:meth:`local_beside`), then
        the received rows added.

        Args:
            x: the rank's rows.
            start: ``(rows) -> InFlight``.
            send: S (this plan's, or the rows a method draws of it).
            remote: R over the rows ``start`` brings.
            row_scale: D's diagonal, or None.
            send_out: where to write ``S x`` (a pooled buffer), or None for a new tensor.
            sent_scale: a factor per sent row, or None.

        Returns:
            The aggregated rows.
        """
        with self.timer.phase("aggregation"):
            rows = send.matmul(x, out=send_out)
            if sent_scale is not None:
                rows.mul_(sent_scale)
        out, received = self.local_beside(start(rows), x)
        with self.timer.phase("aggregation"):
            return remote.matmul(received, out=out, accumulate=True, row_scale=row_scale)

    def through_transposed(self, grad: torch.Tensor, start, send: SparseOperator, remote: SparseOperator,
                           row_scale: torch.Tensor | None, buffered: bool = False,
                           sent_scale: torch.Tensor | None = None) -> torch.Tensor:
        """The transpose of :meth:`through`: ``L^T D G + S^T H``, ``H`` what
        ``start(R^T D G)`` brings back, scaled by ``sent_scale``.

        Args:
            grad: G, the gradient of the aggregated rows.
            start: ``(rows) -> InFlight``, against the forward's direction.
            send: the forward's S.
            remote: the forward's R.
            row_scale: the forward's D, or None.
            buffered: write the intermediate products into pooled buffers.
            sent_scale: the forward's factor per sent row, or None.

        Returns:
            The gradient of the input rows.
        """
        with self.timer.phase("aggregation"):
            if self.settings.bfloat16_gradients:  # scaled and rounded in one pass
                grad = scaled_rounded(grad, row_scale,
                                      out=self._buffer("scaled gradient", len(grad), grad, True) if buffered else None)
            elif row_scale is None:
                grad = grad.contiguous()
            else:
                grad = torch.mul(grad, row_scale[:, None],
                                 out=self._buffer("scaled gradient", len(grad), grad) if buffered else None)
            grad_received = remote.t_matmul(grad, out=self._buffer("send", remote.shape[1], grad) if buffered else None)
        grad_x, grad_sent = self.local_beside(start(grad_received), grad, transpose=True)
        with self.timer.phase("aggregation"):
            if sent_scale is not None:
                grad_sent = grad_sent * sent_scale
            return send.t_matmul(grad_sent, out=grad_x, accumulate=True)
