"""DistGNN's delayed mean on one rank (its maths: :mod:`supergcn.methods.distgnn`): each
training pass sends one bucket of partial aggregates and adds the bucket sent r passes
before, dividing by the degree of what arrived."""

from __future__ import annotations

from collections import deque

import numpy as np
import scipy.sparse as sp
import torch

from supergcn.distributed.comm import Arrived
from supergcn.distributed.operators import SparseOperator, inverse_degree
from supergcn.distributed.protocol import RankMethod
from supergcn.kernels.ranges import block_starts, concatenated_ranges
from supergcn.methods.distgnn import schedule_delay


def bucket_rows(counts: np.ndarray, delay: int, bucket: int) -> tuple[np.ndarray, np.ndarray]:
    """(buffer rows of ``bucket``, its rows per peer) in a buffer of peer blocks of
    ``counts`` rows: rows floor(q n / r) .. floor((q + 1) n / r) - 1 of each n-row block."""
    counts = np.asarray(counts, dtype=np.int64)
    first = counts * bucket // delay
    sizes = counts * (bucket + 1) // delay - first
    return concatenated_ranges(block_starts(counts) + first, sizes), sizes


class _Bucket:
    """One bucket's send operator and counts, and its received rows' operator and share
    of the degree (the sources they sum)."""

    def __init__(self, send: sp.csr_matrix, remote: sp.csr_matrix, delay: int, bucket: int, send_counts: np.ndarray,
                 recv_counts: np.ndarray, received_sources: np.ndarray, kernel: str) -> None:
        send_rows, self.send_counts = bucket_rows(send_counts, delay, bucket)
        recv_rows, self.recv_counts = bucket_rows(recv_counts, delay, bucket)
        self.send = SparseOperator(send[send_rows], kernel)
        remote_part = remote[:, recv_rows].tocsr()
        self.remote = SparseOperator(remote_part, kernel)
        self.degree = torch.from_numpy((remote_part @ received_sources[recv_rows]).astype(np.float32))


class DelayedAggregation(RankMethod):
    """The mean aggregation of one rank under a cd-r (r >= 1) or 0c schedule
    (:mod:`supergcn.methods.distgnn`), on the rank's
    :class:`~supergcn.distributed.rank_operators.RankOperators`: the exchange of its training
    passes (:class:`~supergcn.distributed.protocol.Exchange`), which normalises the mean
    itself."""

    in_evaluation = False  # DistGNN evaluates on the whole graph: the exact exchange
    exact = False
    owns_normalisation = True

    def __init__(self, operators, schedule: str) -> None:
        delay = schedule_delay(schedule)
        if delay == 0:
            raise ValueError("cd-0 is the synchronous exchange: run it with RankOperators")
        self.delay = delay  # None: 0c
        self.operators = operators
        self.local_degree = torch.from_numpy(np.diff(operators.plan.local_indptr).astype(np.float32))
        self.passes = 0        # training passes begun (one per epoch)
        self._in_flight: dict[int, deque] = {}  # per layer, oldest first
        self._inv_degree: dict[int, torch.Tensor] = {}  # per layer, this pass's: its backward's
        self.buckets: list[_Bucket] = []
        if delay is not None:
            matrices = operators.plan.matrices()
            received_sources = operators.coefficients(True, None)  # c_k: a gradient row's sources
            self.buckets = [_Bucket(matrices["send"], matrices["remote"], delay, q, operators.send_counts,
                                    operators.recv_counts, received_sources, operators.local.kernel)
                            for q in range(delay)]

    @property
    def exchange(self) -> DelayedAggregation:
        """The method is its exchange."""
        return self

    def begin_pass(self) -> None:
        """Start a training pass (an epoch's forward)."""
        self.passes += 1

    def forward(self, x: torch.Tensor, row_scale: torch.Tensor | None, layer: int) -> torch.Tensor:
        """y of the pass's ``layer``-th aggregation (the mean: ``row_scale`` is None)."""
        operators, timer = self.operators, self.operators.timer
        with timer.phase("aggregation"):
            out = operators.local.matmul(x)
        degree = self.local_degree
        if self.delay is not None:
            in_flight = self._in_flight.setdefault(layer, deque())
            bucket = self.buckets[(self.passes - 1) % self.delay]
            with timer.phase("aggregation"):
                rows = bucket.send.matmul(x).numpy()
            with timer.phase("communication"):
                in_flight.append(operators.communicator.ialltoallv(rows, bucket.send_counts, bucket.recv_counts))
            if len(in_flight) > self.delay:  # sent r passes ago: the same bucket
                with timer.phase("communication"):
                    arrived = torch.from_numpy(in_flight.popleft().wait())
                with timer.phase("aggregation"):
                    bucket.remote.matmul(arrived, out=out, accumulate=True)
                degree = degree + bucket.degree
        inv_degree = self._inv_degree[layer] = inverse_degree(degree)
        with timer.phase("aggregation"):
            return out.mul_(inv_degree[:, None])

    def backward(self, grad: torch.Tensor, row_scale: torch.Tensor | None, layer: int) -> torch.Tensor:
        """The local gradient of the pass's ``layer``-th aggregation (arrived rows are constants)."""
        with self.operators.timer.phase("aggregation"):
            return self.operators.local.matmul(grad.contiguous() * self._inv_degree[layer][:, None], transpose=True)

    def state(self) -> dict:
        """What a checkpoint needs to continue exactly: the passes and the rows in flight
        (awaited here; every rank has started them, so waiting ends)."""
        in_flight = {layer: [entry.wait().copy() for entry in queue] for layer, queue in self._in_flight.items()}
        self.restore({"passes": self.passes, "in_flight": in_flight})
        return {"passes": self.passes, "in_flight": in_flight}

    def restore(self, state: dict) -> None:
        self.passes = state["passes"]
        self._in_flight = {layer: deque(Arrived(rows) for rows in rows_list)
                           for layer, rows_list in state["in_flight"].items()}

    def close(self) -> None:
        """Wait for every exchange still in flight (before the communicator is closed)."""
        for queue in self._in_flight.values():
            for entry in queue:
                entry.wait()
        self._in_flight.clear()


def build(context) -> RankMethod:
    """The rank's delayed mean under ``context.config.schedule``; cd-0 is the synchronous
    exchange, which the exact operators run (nothing to build).

    Args:
        context: the rank's :class:`~supergcn.train.steps.RankContext`.

    Returns:
        The method's state on this rank (collective).
    """
    if schedule_delay(context.config.schedule) == 0:
        return RankMethod()
    return DelayedAggregation(context.operators, context.config.schedule)
