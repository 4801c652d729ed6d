"""``supergcn bench comm``: the machine's communication parameters L and BW (under ``mpiexec -n P``).

* ping-pong between ranks 0 and 1: half the round trip of an 8-byte message;
* Alltoallv with the same number of bytes m for every peer, m from 8 B to 8 MiB: the
  slowest rank's time per call, the median of repeated calls, each started after a
  barrier. :func:`fit_latency_bandwidth` fits (P - 1) (L + m / BW) to
  these times, which gives the model's L and BW at this P (printed by rank 0; machine
  profiles refit the raw sweep).
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from supergcn.errors import SuperGCNError

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


def fit_latency_bandwidth(peers: np.ndarray, bytes_per_peer: np.ndarray, seconds: np.ndarray) -> tuple[float, float]:
    """(L, BW) of seconds = peers * (L + bytes_per_peer / BW), fitted to relative error
    (least squares on seconds / measured) so small and large messages count alike."""
    peers = np.asarray(peers, dtype=np.float64)
    sizes = np.asarray(bytes_per_peer, dtype=np.float64)
    seconds = np.asarray(seconds, dtype=np.float64)
    design = np.stack([peers, peers * sizes], axis=1) / seconds[:, None]
    (latency, inverse_bandwidth), *_ = np.linalg.lstsq(design, np.ones_like(seconds), rcond=None)
    if latency <= 0 or inverse_bandwidth <= 0:
        raise SuperGCNError(f"the all-to-all timings do not fit L + bytes / BW (L = {latency:.3g} s, "
                            f"1 / BW = {inverse_bandwidth:.3g} s/B)", "rerun `supergcn bench comm` on an idle machine")
    return float(latency), float(1.0 / inverse_bandwidth)


def fit_alltoallv(results: list[dict]) -> tuple[float, float]:
    """(L, BW) fitted jointly to the Alltoallv sweeps of ``supergcn bench comm`` results."""
    peers, sizes, seconds = [], [], []
    for result in results:
        for point in result["alltoallv"]:
            peers.append(result["num_ranks"] - 1)
            sizes.append(point["bytes_per_peer"])
            seconds.append(point["seconds"])
    return fit_latency_bandwidth(np.array(peers), np.array(sizes), np.array(seconds))
