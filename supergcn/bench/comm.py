"""``supergcn bench comm``: the machine's exchange parameters at one P (under ``mpiexec -n P``).

Everything is timed through the code a training exchange runs, every rank at once, in
the state a training step leaves the machine in before an exchange: each rank first
writes a buffer as large as the last-level cache (other work: the kernels before an
exchange stream far more than that) and then the rows it sends, both untimed and before
the barrier that starts the timed part on every rank. A point is the median over calls
of the slowest rank's time:

* ping-pong between ranks 0 and 1: half the round trip of an 8-byte message;
* Alltoallv through :meth:`supergcn.distributed.comm.Communicator.ialltoallv` and its
  wait, with the same m bytes for every peer, m from 8 B to 8 MiB;
* quantization: every rank quantizes n rows of F features addressed to its P - 1 peers
  and dequantizes as many (:func:`~supergcn.kernels.wire.quantize_to_wire`,
  :func:`~supergcn.kernels.wire.dequantize_from_wire`), n from 64 to 65,536;
* optionally, real exchanges of plans (:class:`~supergcn.bench.exchange.TimedExchange`),
  the measurements the model is checked against.

Why that state. Between two ranks here, an 8 MiB exchange took 0.80 ms from a buffer
that stayed in the caches, 1.49 ms from one written just before, and a 400 KB one 120 µs
alone, 270-360 µs after 6 MB of other writes; a small message costs 25 µs with warm
caches and about 100 µs after a step's work (Python's and MPICH's own state is evicted
too). Measured warm, the model missed the exchanges of a training step by up to 2x;
measured in one state, the fit and the exchanges agree. And the points are timed in
turn, one call each per round in a shuffled order: this machine's memory and message
speed drift by up to 2x between runs, and by tens of percent within a second, so a
model fitted in one job and checked in another measures the drift.

The fits to these sweeps are :mod:`supergcn.bench.fits`.
"""

from __future__ import annotations

import time

import numpy as np

from supergcn.bench.fits import fit_exchange, fit_quantization
from supergcn.bench.harness import Measurement, cache_scratch, interleaved_slowest, random_rows
from supergcn.distributed.buffers import aligned_array
from supergcn.naming import DEFAULT_PARAMETER_DTYPE
from supergcn.train.provenance import oversubscribed

PING_PONG_BYTES = 8
ALLTOALL_SIZES = tuple(8 * 4**k for k in range(11))  # 8 B .. 8 MiB per peer
QUANTIZATION_ROWS = tuple(64 * 4**k for k in range(6))  # 64 .. 65,536 rows per rank
#: Bytes per row of the Alltoallv sweep (every size is a whole number of rows).
SWEEP_ROW_BYTES = 8
#: Rounds of the sweeps: each times every point once (the median is kept).
ROUNDS = 20


def ping_pong_latency(comm, repeats: int = 1000) -> float | None:
    """Half the round-trip time of an 8-byte message between ranks 0 and 1 (None if P = 1)."""
    if comm.Get_size() < 2:
        return None
    rank = comm.Get_rank()
    buffer = np.zeros(PING_PONG_BYTES, dtype=np.uint8)
    elapsed = 0.0
    for attempt in range(2):  # the first round warms the connection up
        comm.Barrier()
        started = time.perf_counter()
        for _ in range(repeats):
            if rank == 0:
                comm.Send(buffer, dest=1)
                comm.Recv(buffer, source=1)
            elif rank == 1:
                comm.Recv(buffer, source=0)
                comm.Send(buffer, dest=0)
        elapsed = time.perf_counter() - started
    return comm.bcast(elapsed / repeats / 2 if rank == 0 else None, root=0)


def _peer_counts(comm, total: int) -> np.ndarray:
    """``total`` split as evenly as possible over this rank's peers (itself when alone)."""
    size, rank = comm.Get_size(), comm.Get_rank()
    peers = [r for r in range(size) if r != rank] or [rank]
    counts = np.zeros(size, dtype=np.int64)
    counts[peers] = total // len(peers)
    counts[peers[: total % len(peers)]] += 1
    return counts


class AlltoallvMeasurement(Measurement):
    """One exchange of ``bytes_per_peer`` bytes with every other rank, as training
    exchanges rows: after other work (``scratch`` written), from a buffer written just
    before."""

    def __init__(self, comm, communicator, bytes_per_peer: int, scratch: np.ndarray) -> None:
        self.communicator, self.scratch = communicator, scratch
        self.counts = np.full(comm.Get_size(), bytes_per_peer // SWEEP_ROW_BYTES, dtype=np.int64)
        self.counts[comm.Get_rank()] = 0
        self.send = aligned_array((int(self.counts.sum()), SWEEP_ROW_BYTES), np.uint8)
        self.received = aligned_array(self.send.shape, np.uint8)

    def prepare(self) -> None:
        self.scratch.fill(1)
        self.send.fill(1)

    def run(self) -> tuple[float]:
        started = time.perf_counter()
        self.communicator.ialltoallv(self.send, self.counts, self.counts, out=self.received).wait()
        return (time.perf_counter() - started,)


class QuantizationMeasurement(Measurement):
    """(quantize, dequantize) of ``rows`` rows for this rank's peers, as an exchange
    quantizes what it sends and dequantizes what it receives: after other work
    (``scratch`` written), the rows written just before."""

    def __init__(self, comm, rows: int, features: int, bits: int, parameter_dtype: str,
                 scratch: np.ndarray) -> None:
        from supergcn.kernels.quantization import Quantized, packed_rows

        self.bits, self.parameter_dtype, self.scratch = bits, parameter_dtype, scratch
        self.counts = _peer_counts(comm, rows)
        self.source = random_rows(comm.Get_rank(), rows, features)
        self.rows = aligned_array(self.source.shape, np.float32)
        self.out = Quantized(aligned_array((int(packed_rows(self.counts, bits).sum()), features), np.uint8),
                             aligned_array((rows,), np.float32), aligned_array((rows,), np.float32))
        self.received = aligned_array(self.rows.shape, np.float32)

    def prepare(self) -> None:
        self.scratch.fill(1)
        np.copyto(self.rows, self.source)

    def run(self) -> tuple[float, float]:
        from supergcn.kernels.wire import dequantize_from_wire, quantize_to_wire

        started = time.perf_counter()
        quantized, wire = quantize_to_wire(self.rows, self.counts, self.bits, "nearest", 0, self.parameter_dtype,
                                           self.out)
        quantized_at = time.perf_counter()
        dequantize_from_wire(quantized.packed, wire, self.counts, self.bits, self.received)
        return quantized_at - started, time.perf_counter() - quantized_at


def bench_comm(comm, features: int = 256, bits: int = 2, parameter_dtype: str = DEFAULT_PARAMETER_DTYPE,
               threads: int = 1, exchanges=(), rounds: int = ROUNDS, sizes=ALLTOALL_SIZES,
               quantization_rows=QUANTIZATION_ROWS) -> dict:
    """Ping-pong latency, the Alltoallv and quantization sweeps and the fits to them, and
    the time of each real exchange in ``exchanges`` (``(strategy, plan dir, bits)``: one
    layer's, as :class:`~supergcn.bench.exchange.TimedExchange` does it), every one
    timed once per round, so that the fit and the exchanges it is checked against see the
    same machine."""
    from supergcn.bench.exchange import EXCHANGE_PARTS, TimedExchange
    from supergcn.distributed.comm import Communicator

    size = comm.Get_size()
    communicator = Communicator(comm)
    latency = ping_pong_latency(comm)
    scratch = cache_scratch()
    calls = {("alltoallv", m): AlltoallvMeasurement(comm, communicator, m, scratch) for m in sizes}
    calls.update({("quantization", n): QuantizationMeasurement(comm, n, features, bits, parameter_dtype, scratch)
                  for n in quantization_rows})
    timed = [TimedExchange(comm, plan, features, width, parameter_dtype, scratch=scratch)
             for _, plan, width in exchanges]
    calls.update({("exchange", index): exchange for index, exchange in enumerate(timed)})
    medians = interleaved_slowest(comm, calls, rounds)
    for exchange in timed:
        exchange.close()
    communicator.close()
    result = {"num_ranks": size, **oversubscribed(comm, threads), "rounds": rounds, "ping_pong_latency_s": latency,
              "alltoallv": [{"bytes_per_peer": int(m), "seconds": float(medians["alltoallv", m][0])} for m in sizes],
              "quantization": {"features": features, "bits": bits, "parameter_dtype": parameter_dtype,
                               "sweep": [{"rows": int(n), "values": int(n) * features,
                                          "quantize_seconds": float(medians["quantization", n][0]),
                                          "dequantize_seconds": float(medians["quantization", n][1])}
                                         for n in quantization_rows]},
              "exchanges": [{"strategy": strategy, "plan": str(plan), "bits": width, "features": features,
                             "parameter_dtype": parameter_dtype,
                             "seconds": dict(zip(EXCHANGE_PARTS, medians["exchange", index].tolist()))}
                            for index, (strategy, plan, width) in enumerate(exchanges)]}
    # Rank 0 alone fits, so a sweep that does not fit is reported once (and aborts the job).
    if comm.Get_rank() == 0:
        result["fit"] = {**(fit_exchange([result]) if size > 1 else {}), **fit_quantization(result)}
    return result
