"""``supergcn bench exchange``: the exchange a training layer really does, from a plan.

``RankOperators.start_exchange`` with random rows of F features, FP32 or quantized, each
call started after a barrier; the median over calls of the slowest rank's time, split
into communication and (de)quantization: the measurement the performance model is
checked against (run under ``mpiexec -n P``; ``supergcn bench comm`` times the same
exchanges in turn with the sweeps the model is fitted to).
"""

from __future__ import annotations

import time

import numpy as np

from supergcn.bench.harness import Measurement, cache_scratch, random_rows, slowest_median
from supergcn.distributed.buffers import aligned_array
from supergcn.naming import DEFAULT_PARAMETER_DTYPE, PARAMETER_DTYPES
from supergcn.train.provenance import oversubscribed

#: The parts of an exchange's time, in the order :class:`TimedExchange` returns them.
EXCHANGE_PARTS = ("total", "communication", "quantization")


class TimedExchange(Measurement):
    """One layer's forward exchange of a plan as training does it (no overlap): after
    other work (``scratch``, as :mod:`supergcn.bench.comm` measures), from rows
    written just before; :meth:`run` returns its :data:`EXCHANGE_PARTS` in seconds."""

    def __init__(self, comm, plan_dir, features: int, bits: int, parameter_dtype: str = DEFAULT_PARAMETER_DTYPE,
                 seed: int = 0, scratch: np.ndarray | None = None) -> None:
        import torch

        from supergcn.distributed.comm import Communicator
        from supergcn.distributed.rank_operators import ExchangeSettings, RankOperators
        from supergcn.distributed.timing import PhaseTimer
        from supergcn.plan.store import load_rank_plan

        rank = comm.Get_rank()
        plan = load_rank_plan(plan_dir, rank)
        self.communicator = Communicator(comm)
        self.timer = PhaseTimer()
        self.operators = RankOperators(plan, self.communicator, self.timer, settings=ExchangeSettings(
            bits=bits, overlap=False, parameter_dtype=parameter_dtype))
        self.operators.training = True  # quantize as in a training step
        self.source = random_rows(seed + rank, int(plan.send_counts.sum()), features)
        self.rows = torch.from_numpy(aligned_array(self.source.shape, np.float32))  # as a pooled buffer
        self.scratch = cache_scratch() if scratch is None else scratch

    def prepare(self) -> None:
        # As in a training step: after other work, the rows written just before.
        self.scratch.fill(1)
        np.copyto(self.rows.numpy(), self.source)

    def run(self) -> tuple[float, float, float]:
        self.timer.reset()
        started = time.perf_counter()
        self.operators.start_exchange(self.rows).finish()
        return time.perf_counter() - started, self.timer.seconds["communication"], self.timer.seconds["quantization"]

    def bytes_sent(self) -> int:
        """Bytes this rank has sent so far (data and parameters)."""
        sent = self.communicator.bytes_sent
        return int(sent["data"].sum() + sent["params"].sum())

    def close(self) -> None:
        self.communicator.close()


def bench_exchange(comm, plan_dir, features: int, bits: int, repeats: int = 100,
                   parameter_dtype: str = DEFAULT_PARAMETER_DTYPE, threads: int = 1, seed: int = 0) -> dict:
    """Time one layer's forward exchange of a plan (:class:`TimedExchange`).

    Returns, on every rank, the median over exchanges of the slowest rank's seconds
    (``total``, ``communication``, ``quantization``), whether the ranks ask for more cores
    than they have, and the most bytes a rank sent per exchange."""
    from mpi4py import MPI

    exchange = TimedExchange(comm, plan_dir, features, bits, parameter_dtype, seed)
    seconds = dict(zip(EXCHANGE_PARTS, slowest_median(comm, exchange, repeats).tolist()))
    sent = comm.allreduce(exchange.bytes_sent(), op=MPI.MAX)
    exchange.close()
    return {"num_ranks": comm.Get_size(), **oversubscribed(comm, threads), "features": features, "bits": bits,
            "repeats": repeats, "parameter_dtype": parameter_dtype,
            "parameter_bytes": PARAMETER_DTYPES[parameter_dtype], "seconds": seconds,
            "max_bytes_sent_per_exchange": sent // (repeats + 1)}
