"""MPI microbenchmarks behind the performance model (run under ``mpiexec -n P``).

``supergcn bench comm``: the machine's communication parameters.

* ping-pong between ranks 0 and 1: half the round trip of an 8-byte message;
* Alltoallv with the same number of bytes m for every peer, m from 8 B to 8 MiB: the
  slowest rank's time per call, the median of repeated calls, each started after a
  barrier. ``supergcn.perfmodel.fit_latency_bandwidth`` fits (P - 1) (L + m / BW) to
  these times, which gives the model's L and BW at this P (printed by rank 0; machine
  profiles refit the raw sweep).

``supergcn bench exchange``: the exchange a training layer really does, from a plan
(``RankOperators.start_exchange`` with random rows of F features, FP32 or quantized),
each call started after a barrier; the largest over ranks of the per-rank mean time,
split into communication and (de)quantization: the measurement the model is checked
against.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

PING_PONG_BYTES = 8
ALLTOALL_SIZES = tuple(8 * 4**k for k in range(11))  # 8 B .. 8 MiB per peer


def _repeats_for(nbytes: int, budget_bytes: int = 2**26, low: int = 5, high: int = 200) -> int:
    return int(min(high, max(low, budget_bytes // max(nbytes, 1))))


def _slowest(comm, seconds: float) -> float:
    from mpi4py import MPI

    return comm.allreduce(seconds, op=MPI.MAX)


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


def alltoallv_seconds(comm, bytes_per_peer: int, repeats: int) -> float:
    """Median over ``repeats`` of the slowest rank's time for one Alltoallv sending
    ``bytes_per_peer`` bytes to every other rank."""
    size, rank = comm.Get_size(), comm.Get_rank()
    counts = np.full(size, bytes_per_peer, dtype=np.int64)
    counts[rank] = 0
    displacements = np.concatenate([[0], np.cumsum(counts)[:-1]])
    send = np.ones(int(counts.sum()), dtype=np.uint8)
    received = np.empty_like(send)
    spec = (counts.tolist(), displacements.tolist())
    times = []
    for attempt in range(repeats + 1):
        comm.Barrier()
        started = time.perf_counter()
        comm.Alltoallv([send, spec], [received, spec])
        seconds = _slowest(comm, time.perf_counter() - started)
        if attempt:
            times.append(seconds)
    return statistics.median(times)


def bench_comm(comm, sizes=ALLTOALL_SIZES) -> dict:
    """Ping-pong latency and the Alltoallv sweep, with the (L, BW) fitted to the sweep."""
    from supergcn.perfmodel import fit_alltoallv

    size = comm.Get_size()
    latency = ping_pong_latency(comm)
    sweep = [{"bytes_per_peer": int(m), "seconds": alltoallv_seconds(comm, int(m), _repeats_for(m * size))}
             for m in sizes]
    result = {"num_ranks": size, "ping_pong_latency_s": latency, "alltoallv": sweep}
    # Rank 0 alone fits, so a sweep that does not fit is reported once (and aborts the job).
    if size > 1 and comm.Get_rank() == 0:
        fitted_latency, bandwidth = fit_alltoallv([result])
        result["fit"] = {"latency_s": fitted_latency, "bandwidth_bytes_per_s": bandwidth}
    return result


def bench_exchange(comm, plan_dir, features: int, bits: int, repeats: int = 20, bfloat16_parameters: bool = True,
                   seed: int = 0) -> dict:
    """Time one layer's forward exchange of a plan, as training does it (no overlap).

    Returns, on every rank, the largest over ranks of each rank's mean seconds per
    exchange: ``total`` (wall clock), ``communication`` and ``quantization`` (its parts)."""
    import torch
    from mpi4py import MPI

    from supergcn.aggregation import ExchangeSettings, RankOperators
    from supergcn.comm import Communicator
    from supergcn.plan import load_rank_plan
    from supergcn.timing import PhaseTimer

    rank = comm.Get_rank()
    plan = load_rank_plan(plan_dir, rank)
    communicator = Communicator(comm)
    timer = PhaseTimer()
    operators = RankOperators(plan, communicator, timer, settings=ExchangeSettings(
        bits=bits, overlap=False, bfloat16_parameters=bfloat16_parameters))
    operators.training = True  # quantize as in a training step
    rows = torch.from_numpy(np.random.default_rng(seed + rank).standard_normal(
        (int(plan.send_counts.sum()), features), dtype=np.float32))
    totals = {"total": 0.0, "communication": 0.0, "quantization": 0.0}
    for attempt in range(repeats + 1):
        comm.Barrier()
        timer.reset()
        started = time.perf_counter()
        operators.start_exchange(rows)()
        elapsed = time.perf_counter() - started
        if attempt:
            totals["total"] += elapsed
            totals["communication"] += timer.seconds["communication"]
            totals["quantization"] += timer.seconds["quantization"]
    means = {key: value / repeats for key, value in totals.items()}
    slowest = {key: comm.allreduce(value, op=MPI.MAX) for key, value in means.items()}
    sent = comm.allreduce(int(communicator.bytes_sent["data"].sum() + communicator.bytes_sent["params"].sum()),
                          op=MPI.MAX)
    communicator.close()
    return {"num_ranks": comm.Get_size(), "features": features, "bits": bits, "repeats": repeats,
            "parameter_bytes": 2 if bfloat16_parameters else 4,
            "seconds": slowest, "max_bytes_sent_per_exchange": sent // (repeats + 1)}
