"""Distributed neighbour aggregation as a differentiable operator.

For rank i with owned features X_i (n_i x F), the aggregation over the global graph
restricted to rank i's destinations is

    Y_i = D_i (L_i X_i + R_i B_i),      B_i = concat_j S_j X_j   (rows addressed to i),

with L the local CSR, S the send operator (one row per send-buffer row: a PRE partial
sum or a single POST source, see :mod:`supergcn.plan.rank_plan`), R the post-aggregation CSR over
the receive buffer B, and D a diagonal row scale (1/deg for the mean). Forward: S X,
exchange (Alltoallv, started before L X and awaited after it, so the local aggregation
overlaps the transfer), L X, then D (· + R B). While training, exchanged rows may be
quantized (:class:`ExchangeSettings`). Backward is the transpose: with G = dL/dY,

    dL/dX_i = L_i^T (D_i G_i) + S_i^T H_i,     H = exchange^T(R^T D G)

(the same Alltoallv with send and receive counts swapped). Products run on the numba
kernels of :mod:`supergcn.kernels` (``kernel="numba"``, the default) or on torch's CSR
``torch.sparse.mm`` (``kernel="torch"``, the reference path).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch

from supergcn.distributed.adaptive import UNASSIGNED_BITS, AdaptiveBits, AdaptiveSettings, MixedLayout
from supergcn.distributed.bit_assignment import WIDTHS
from supergcn.distributed.comm import Communicator, aligned_buffer, polls_to_finish
from supergcn.distributed.delayed import DelayedAggregation, DelayedMean
from supergcn.distributed.timing import PhaseTimer
from supergcn.kernels.gather import GatherCsr
from supergcn.kernels.quantization import Quantized, packed_rows
from supergcn.kernels.wire import dequantize_from_wire, quantize_to_wire
from supergcn.naming import ADAPTIVE, DEFAULT_PARAMETER_DTYPE, KERNELS
from supergcn.plan.rank_plan import RankPlan

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")

#: The most pieces an overlapped local product is cut into (each costs a parallel launch
#: and an MPI poll, some tens of microseconds).
MAX_PIECES = 64


class SparseOperator:
    """A fixed 0/1 sparse matrix A applying A x (optionally scaled and accumulated) and A^T x."""

    def __init__(self, matrix: sp.csr_matrix, kernel: str = "numba") -> None:
        if kernel not in KERNELS:
            raise ValueError(f"unknown kernel {kernel!r}: choose one of {KERNELS}")
        matrix = sp.csr_matrix(matrix)
        matrix.sort_indices()
        self.kernel = kernel
        self.shape = matrix.shape
        if kernel == "numba":
            self._forward = GatherCsr(matrix.indptr, matrix.indices, matrix.shape[1])
            self._transpose = self._forward.transpose()
        else:
            self._forward = self._to_torch(matrix)
            self._transpose = self._to_torch(matrix.T.tocsr())

    @staticmethod
    def _to_torch(matrix: sp.csr_matrix) -> torch.Tensor:
        matrix.sort_indices()
        return torch.sparse_csr_tensor(torch.from_numpy(matrix.indptr.astype(np.int64)),
                                       torch.from_numpy(matrix.indices.astype(np.int64)),
                                       torch.ones(matrix.nnz), size=matrix.shape, check_invariants=False)

    def _apply(self, op, x: torch.Tensor, out: torch.Tensor | None, accumulate: bool,
               row_scale: torch.Tensor | None, pieces: int = 1, between=None) -> torch.Tensor:
        x = x.contiguous()
        if self.kernel == "numba":
            if out is None:
                out = x.new_empty((op.shape[0], x.shape[1]))
                accumulate = False
            op.matmul(x.numpy(), out=out.numpy(), accumulate=accumulate,
                      row_scale=None if row_scale is None else row_scale.numpy(), pieces=pieces, between=between)
            return out
        product = (x.new_zeros((op.shape[0], x.shape[1])) if op._nnz() == 0 or 0 in op.shape
                   else torch.sparse.mm(op.to(x.dtype), x))
        if out is not None and accumulate:
            product = product + out
        if row_scale is not None:
            product = product * row_scale[:, None]
        if out is None:
            return product
        out.copy_(product)
        return out

    def matmul(self, x, out=None, accumulate=False, row_scale=None, transpose=False, pieces=1,
               between=None) -> torch.Tensor:
        """``diag(row_scale) (out + A x)`` if accumulating into ``out``, else ``diag(row_scale) A x``
        (A^T for ``transpose``). The numba kernel runs in ``pieces`` and calls ``between()``
        after each (:meth:`supergcn.kernels.gather.GatherCsr.matmul`)."""
        return self._apply(self._transpose if transpose else self._forward, x, out, accumulate, row_scale,
                           pieces, between)

    def t_matmul(self, x, out=None, accumulate=False) -> torch.Tensor:
        """``out + A^T x`` if accumulating into ``out``, else ``A^T x``."""
        return self._apply(self._transpose, x, out, accumulate, None)


@dataclass(frozen=True)
class ExchangeSettings:
    """How boundary rows travel while training (evaluation always exchanges float32).

    ``bits`` < 32 quantizes every exchanged row, embeddings forward and gradients
    backward (:mod:`supergcn.kernels.quantization`); ``adaptive`` bits are assigned per
    message group by AdaQP's solver (:mod:`supergcn.distributed.adaptive`); ``overlap`` starts the exchange before the
    local aggregation and waits for it afterwards.
    """

    bits: int | str = 32
    rounding: str = "nearest"
    overlap: bool = True
    parameter_dtype: str = DEFAULT_PARAMETER_DTYPE
    seed: int = 0
    adaptive: AdaptiveSettings = AdaptiveSettings()


class BufferPool:
    """Memory reused from one exchange (and epoch) to the next: one growing byte buffer per
    role, handed out as an array of the shape asked for.

    Contract: an array handed out for a role is valid until the same role is asked for
    again, which :class:`RankOperators` does only in its next exchange (or, for the scaled
    gradient, its next backward); exchanges never overlap. So one buffer per role serves
    every layer and both directions; it grows to the largest request and is then allocated
    no more, where fresh arrays would have the kernel map and zero their pages every time.
    Buffers start on a page (:func:`~supergcn.distributed.comm.aligned_buffer`), as the
    exchanges they feed run fastest.
    """

    def __init__(self) -> None:
        self._buffers: dict[str, np.ndarray] = {}

    def array(self, role: str, shape: tuple[int, ...], dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        buffer = self._buffers.get(role)
        if buffer is None or buffer.nbytes < nbytes:
            buffer = self._buffers[role] = aligned_buffer(max(nbytes, 1))
        return buffer[:nbytes].view(dtype).reshape(shape)

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes for b in self._buffers.values())


class Exchange:
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
    """Everything one rank needs to aggregate: its plan's operators and exchange counts."""

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
        self._layers_begun = 0
        self._send_sources = np.diff(matrices["send"].indptr).astype(np.float32)[:, None]
        self.adaptive = (AdaptiveBits(communicator, settings.adaptive, self.send_counts, self.recv_counts,
                                      self.coefficients) if settings.bits == ADAPTIVE else None)

    def _buffer(self, role: str, rows: int, like: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(self.buffers.array(role, (rows, like.shape[1]), np.float32))

    def begin_pass(self, training: bool) -> None:
        """Start a forward pass over all layers (training: quantized where configured)."""
        self.training = training
        self._layers_begun = 0

    def next_layer(self) -> int:
        """The position in the pass of the aggregation about to run (its layer)."""
        layer, self._layers_begun = self._layers_begun, self._layers_begun + 1
        return layer

    def start_exchange(self, rows: torch.Tensor, reverse: bool = False, layer: int = 0,
                       row_scale: torch.Tensor | None = None) -> Exchange:
        """Start sending ``rows``; the exchange's :meth:`~Exchange.finish` waits and returns
        the rows received. Its buffers are reused by the next exchange, so finish one
        before starting another. The ``layer`` and the destinations' ``row_scale`` are
        what adaptive bit widths need to know of the exchange."""
        if self._in_flight:
            raise RuntimeError("an exchange is still in flight: finish it before starting another")
        send_counts, recv_counts = ((self.recv_counts, self.send_counts) if reverse
                                    else (self.send_counts, self.recv_counts))
        rows = rows.contiguous().numpy()
        bits = self.settings.bits
        self._in_flight = True
        if not self.training or bits == 32:
            return self._exchange_float32(rows, send_counts, recv_counts)
        if bits != ADAPTIVE:
            return self._exchange_quantized(rows, send_counts, recv_counts, bits)
        self.adaptive.trace((reverse, layer), rows, row_scale)
        layout = self.adaptive.layouts.get((reverse, layer))
        if layout is None:
            return self._exchange_quantized(rows, send_counts, recv_counts, UNASSIGNED_BITS)
        return self._exchange_mixed(rows, layout)

    def _next_seed(self) -> int:
        """The seed of this rank's next quantization (its stochastic-rounding stream)."""
        self.quantize_calls += 1
        return (self.settings.seed * 1_000_003 + self.communicator.rank) * 1_000_003 + self.quantize_calls - 1

    def _exchange_float32(self, rows: np.ndarray, send_counts: np.ndarray, recv_counts: np.ndarray) -> Exchange:
        with self.timer.phase("communication"):
            pending = self.communicator.ialltoallv(
                rows, send_counts, recv_counts,
                out=self.buffers.array("received", (int(recv_counts.sum()), rows.shape[1]), rows.dtype))

        def finish():
            self._in_flight = False
            with self.timer.phase("communication"):
                return torch.from_numpy(pending.wait())
        return Exchange([pending], finish)

    def _exchange_quantized(self, rows: np.ndarray, send_counts: np.ndarray, recv_counts: np.ndarray,
                            bits: int) -> Exchange:
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
        return Exchange([data, parameters], finish)

    def _exchange_mixed(self, rows: np.ndarray, layout: MixedLayout) -> Exchange:
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
        return Exchange([data, parameters], finish)

    def coefficients(self, reverse: bool, row_scale: torch.Tensor | None) -> np.ndarray:
        """Sum of squared aggregation coefficients of every row this rank sends forward
        (``reverse`` False: the destinations' squared scales, summed by their receiver) or
        backward (the forward row's number of sources, told by its sender). Collective."""
        if not reverse:
            scale = torch.ones(self.plan.num_owned) if row_scale is None else row_scale
            at_receiver = self.remote.t_matmul((scale.float() ** 2)[:, None].contiguous()).numpy()
            told = self.communicator.ialltoallv(at_receiver, self.recv_counts, self.send_counts)
        else:
            told = self.communicator.ialltoallv(self._send_sources, self.send_counts, self.recv_counts)
        return told.wait()[:, 0].astype(np.float64)

    def _local_overlapped(self, exchange: Exchange, x: torch.Tensor, **product) -> tuple[torch.Tensor, torch.Tensor]:
        """(the local product of ``x``, the exchange's rows): the product runs while the
        exchange is in flight and polls it between pieces (see :mod:`supergcn.distributed.comm`);
        without overlap the exchange completes first."""
        if not self.settings.overlap:
            received = exchange.finish()
            with self.timer.phase("aggregation"):
                return self.local.matmul(x, **product), received
        bits = self.settings.bits if self.training else 32
        if bits == ADAPTIVE:
            bits = max(WIDTHS)  # the widest an adaptive row can be
        wire_bytes = self._exchange_rows * x.shape[1] * bits // 8  # the larger direction, either way round
        pieces = max(1, min(MAX_PIECES, polls_to_finish(wire_bytes)))
        with self.timer.phase("aggregation"):
            out = self.local.matmul(x, pieces=pieces, between=exchange.poll, **product)
        return out, exchange.finish()

    def forward(self, x: torch.Tensor, row_scale: torch.Tensor | None) -> tuple[torch.Tensor, int]:
        """(the aggregation, the layer it is: its position in the pass)."""
        layer = self.next_layer()
        with self.timer.phase("aggregation"):
            send = self.send.matmul(x, out=self._buffer("send", self.send.shape[0], x))
        exchange = self.start_exchange(send, layer=layer, row_scale=row_scale)
        out, received = self._local_overlapped(exchange, x)
        with self.timer.phase("aggregation"):
            return self.remote.matmul(received, out=out, accumulate=True, row_scale=row_scale), layer

    def backward(self, grad: torch.Tensor, row_scale: torch.Tensor | None, layer: int) -> torch.Tensor:
        with self.timer.phase("aggregation"):
            if row_scale is None:
                grad = grad.contiguous()
            else:
                grad = torch.mul(grad, row_scale[:, None], out=self._buffer("scaled gradient", len(grad), grad))
            grad_received = self.remote.t_matmul(grad, out=self._buffer("send", self.remote.shape[1], grad))
        exchange = self.start_exchange(grad_received, reverse=True, layer=layer)
        grad_x, grad_send = self._local_overlapped(exchange, grad, transpose=True)
        with self.timer.phase("aggregation"):
            return self.send.t_matmul(grad_send, out=grad_x, accumulate=True)


class _DistributedAggregation(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, operators: RankOperators, row_scale):
        ctx.operators, ctx.row_scale = operators, row_scale
        out, ctx.layer = operators.forward(x.detach(), row_scale)
        return out

    @staticmethod
    def backward(ctx, grad):
        return ctx.operators.backward(grad, ctx.row_scale, ctx.layer), None, None


class GraphOps:
    """Normalised aggregations of one rank, differentiable through the exchange.

    * ``mean(x)[v] = (1/deg(v)) * sum_{u in N(v)} x[u]`` (0 for isolated v), deg global;
    * ``gcn(x)[v] = d(v)^{-1/2} * sum_{u in N(v) ∪ {v}} d(u)^{-1/2} x[u]``, ``d = |N(v) ∪ {v}|``
      (PyG's ``gcn_norm`` with ``add_remaining_self_loops``).

    Under a DistGNN schedule (``delayed``, :mod:`supergcn.distributed.delayed`) the mean
    aggregation of training passes is the delayed one; evaluation stays exact.
    """

    def __init__(self, operators: RankOperators, delayed: DelayedAggregation | None = None) -> None:
        self.operators = operators
        self.delayed = delayed
        plan = operators.plan
        degree = torch.from_numpy(plan.in_degree.astype(np.float32))
        self.inv_degree = torch.where(degree > 0, 1.0 / degree.clamp(min=1), torch.zeros_like(degree))
        rows = np.repeat(np.arange(plan.num_owned), np.diff(plan.local_indptr))
        has_loop = np.zeros(plan.num_owned, dtype=bool)
        has_loop[rows[plan.local_indices == rows]] = True
        self.missing_loop = torch.from_numpy((~has_loop).astype(np.float32))[:, None]
        self.inv_sqrt_gcn_degree = (degree + self.missing_loop[:, 0]).rsqrt()

    def begin_pass(self, training: bool) -> None:
        """Start a forward pass over all layers: a training pass (quantized, delayed
        exchanges where configured) or an evaluation pass (exact float32 exchanges)."""
        self.operators.begin_pass(training)
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
        and :meth:`reassign_bits` must follow it."""
        adaptive = self.operators.adaptive
        return adaptive is not None and adaptive.begin_epoch(epoch, last_epoch)

    def reassign_bits(self) -> dict:
        """AdaQP's re-assignment after a traced epoch (collective): per exchange, on rank 0,
        rows per width, solver objective and seconds (:meth:`AdaptiveBits.reassign`)."""
        return self.operators.adaptive.reassign()

    def state(self) -> dict:
        """The exchange state that lives across epochs, for a checkpoint: the position in
        the stochastic-rounding stream, DistGNN's rows in flight, AdaQP's assignments."""
        adaptive = self.operators.adaptive
        return {"quantize_calls": self.operators.quantize_calls,
                "delayed": None if self.delayed is None else self.delayed.state(),
                "bit_assignment": None if adaptive is None else adaptive.state()}

    def restore(self, state: dict) -> None:
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
        """``function(*inputs)`` booked to ``phase`` of the rank's timer (forward and backward)."""
        return self.operators.timer.timed(phase, function, *inputs)

    def sum(self, x: torch.Tensor, row_scale: torch.Tensor | None = None) -> torch.Tensor:
        return _DistributedAggregation.apply(x, self.operators, row_scale)

    def mean(self, x: torch.Tensor) -> torch.Tensor:
        if self.delayed is not None and self.operators.training:
            return DelayedMean.apply(x, self.delayed)
        return self.sum(x, self.inv_degree)

    def gcn(self, x: torch.Tensor) -> torch.Tensor:
        scale = self.inv_sqrt_gcn_degree[:, None]
        scaled = self.timed("aggregation", torch.mul, x, scale)
        return self.timed("aggregation", self._add_self_loops, self.sum(scaled, self.inv_sqrt_gcn_degree), scaled)

    def _add_self_loops(self, aggregated: torch.Tensor, scaled: torch.Tensor) -> torch.Tensor:
        return aggregated + self.missing_loop * scaled * self.inv_sqrt_gcn_degree[:, None]
