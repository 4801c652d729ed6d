"""``supergcn bench exchange``: the exchange a training layer really does, from a plan.

``RankOperators.start_exchange`` with random rows of F features, FP32 or quantized, each
call started after a barrier; the largest over ranks of the per-rank mean time, split
into communication and (de)quantization: the measurement the performance model is
checked against (run under ``mpiexec -n P``).
"""

from __future__ import annotations

import time

import numpy as np

from supergcn.naming import DEFAULT_PARAMETER_DTYPE, PARAMETER_DTYPES


def bench_exchange(comm, plan_dir, features: int, bits: int, repeats: int = 20,
                   parameter_dtype: str = DEFAULT_PARAMETER_DTYPE, seed: int = 0) -> dict:
    """Time one layer's forward exchange of a plan, as training does it (no overlap).

    Returns, on every rank, the largest over ranks of each rank's mean seconds per
    exchange: ``total`` (wall clock), ``communication`` and ``quantization`` (its parts)."""
    import torch
    from mpi4py import MPI

    from supergcn.distributed.aggregation import ExchangeSettings, RankOperators
    from supergcn.distributed.comm import Communicator
    from supergcn.distributed.timing import PhaseTimer
    from supergcn.partition.plan import load_rank_plan

    rank = comm.Get_rank()
    plan = load_rank_plan(plan_dir, rank)
    communicator = Communicator(comm)
    timer = PhaseTimer()
    operators = RankOperators(plan, communicator, timer, settings=ExchangeSettings(
        bits=bits, overlap=False, parameter_dtype=parameter_dtype))
    operators.training = True  # quantize as in a training step
    rows = torch.from_numpy(np.random.default_rng(seed + rank).standard_normal(
        (int(plan.send_counts.sum()), features), dtype=np.float32))
    totals = {"total": 0.0, "communication": 0.0, "quantization": 0.0}
    for attempt in range(repeats + 1):
        comm.Barrier()
        timer.reset()
        started = time.perf_counter()
        operators.start_exchange(rows).finish()
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
            "parameter_dtype": parameter_dtype, "parameter_bytes": PARAMETER_DTYPES[parameter_dtype],
            "seconds": slowest, "max_bytes_sent_per_exchange": sent // (repeats + 1)}
