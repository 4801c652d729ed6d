"""The timing harness every benchmark shares: one process, or every rank of an MPI job.

This machine's memory and message speed drift by up to 2x between runs and by tens of
percent within a second, so what is compared is timed *in turn*, round after round
(:func:`interleaved` in one process, :func:`interleaved_slowest` over ranks), and each
figure is a median. Across ranks a call's time is the slowest rank's
(:func:`slowest_call`), each call started by a barrier after an untimed preparation.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from supergcn.distributed.buffers import aligned_array

#: Bytes assumed for the last-level cache where Linux does not say.
DEFAULT_CACHE_BYTES = 32 * 2**20


def say_if_oversubscribed(ranks: int, threads: int) -> bool:
    """Print to standard error, before a benchmark launches ``ranks`` MPI ranks of
    ``threads`` threads here, that they outnumber this machine's cores where they do: the
    ranks then take turns on the cores, and every time it prints includes that wait.

    Returns:
        Whether they outnumber them.
    """
    cores = len(os.sched_getaffinity(0))
    if ranks * threads <= cores:
        return False
    print(f"note: {ranks} rank(s) x {threads} thread(s) on {cores} core(s): oversubscribed, so the times below "
          "include the ranks' wait for a core; compare them only with runs as crowded", file=sys.stderr, flush=True)
    return True


def timed(function, repeats: int) -> tuple[float, float]:
    """(first call seconds, median of ``repeats`` further calls)."""
    started = time.perf_counter()
    function()
    first = time.perf_counter() - started
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return first, statistics.median(times)


def interleaved(functions: dict, repeats: int) -> dict[str, float]:
    """Median seconds of each function, called in turn ``repeats`` times after a warm-up
    round, so that a drift in memory bandwidth during the run reaches all of them alike."""
    times = {name: [] for name in functions}
    for round_ in range(repeats + 1):
        for name, function in functions.items():
            started = time.perf_counter()
            function()
            if round_:
                times[name].append(time.perf_counter() - started)
    return {name: statistics.median(t) for name, t in times.items()}


class Measurement:
    """What one timed call does: :meth:`prepare` (untimed, before the barrier that starts
    the call on every rank, so that ranks whose preparation takes longer do not make the
    others wait inside the timed part), then :meth:`run`, which returns the seconds of
    each of its parts."""

    def prepare(self) -> None:
        pass

    def run(self) -> tuple[float, ...]:
        raise NotImplementedError


def slowest_call(comm, measurement: Measurement) -> np.ndarray:
    """The slowest rank's seconds for each part of one :class:`Measurement` (collective)."""
    from mpi4py import MPI

    measurement.prepare()
    comm.Barrier()
    seconds = np.atleast_1d(np.asarray(measurement.run(), dtype=np.float64))
    comm.Allreduce(MPI.IN_PLACE, seconds, op=MPI.MAX)
    return seconds


def slowest_times(comm, measurement: Measurement, repeats: int) -> np.ndarray:
    """:func:`slowest_call` for ``repeats`` calls after one warm-up call (repeats x parts)."""
    slowest_call(comm, measurement)
    return np.array([slowest_call(comm, measurement) for _ in range(repeats)])


def slowest_median(comm, measurement: Measurement, repeats: int) -> np.ndarray:
    """Median over calls of :func:`slowest_times`, per part."""
    return np.median(slowest_times(comm, measurement, repeats), axis=0)


def interleaved_slowest(comm, calls: dict, rounds: int, seed: int = 0) -> dict:
    """Per ``key: measurement``, the median over ``rounds`` of the slowest rank's time of
    one call. Every round times every measurement once, in an order shuffled afresh (the
    same on every rank), so that a machine whose speed drifts drifts alike for all of
    them; each timed call follows an untimed one of its own."""
    keys = list(calls)
    order = np.random.default_rng(seed)
    times: dict = {key: [] for key in keys}
    for _ in range(rounds):
        for index in order.permutation(len(keys)):
            times[keys[index]].append(slowest_times(comm, calls[keys[index]], 1)[0])
    return {key: np.median(np.array(values), axis=0) for key, values in times.items()}


def cache_sizes(root: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> dict[str, int]:
    """Bytes of each data cache level as Linux reports it for CPU 0 (``{"L1": .., "L2": ..,
    "L3": ..}``; empty where the system says nothing). A virtual machine may report the
    host's sizes."""
    sizes = {}
    for index in sorted(root.glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            text = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified") and text:
            multiplier = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1], 1)
            sizes[f"L{level}"] = int(text.rstrip("KMG")) * multiplier
    return sizes


def random_rows(seed: int, rows: int, features: int) -> np.ndarray:
    """``rows`` x ``features`` standard normal float32 values in an :func:`aligned_array`."""
    out = aligned_array((rows, features), np.float32)
    np.random.default_rng(seed).standard_normal(out.shape, dtype=np.float32, out=out)
    return out


def last_level_cache_bytes() -> int:
    """The largest CPU cache's size as Linux reports it (:data:`DEFAULT_CACHE_BYTES` where
    it does not)."""
    return max(cache_sizes().values(), default=DEFAULT_CACHE_BYTES)


def cache_scratch() -> np.ndarray:
    """A buffer as large as the last-level cache. Each timed call writes it first, so that
    every call starts as an exchange in a training step does, with the caches full of
    lines other work has just modified (see the module docstring)."""
    return aligned_array((last_level_cache_bytes(),), np.uint8)
