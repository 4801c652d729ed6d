"""DistGNN's delayed remote partial aggregates (Md et al., SC '21): the schedules cd-r and 0c.

DistGNN sends the partial aggregates of boundary vertices (our ``pre`` rows) but not every
epoch: cd-r sends a bucket of them per epoch and adds each at its destination r epochs
later; 0c never communicates; cd-0 is the ordinary synchronous exchange (and is run by
:class:`~supergcn.distributed.rank_operators.RankOperators`, gradients included, so that it
equals ``pre`` exactly). The public implementation is DGL's DRPA (``dgl/distgnn``, PR
#3381); this module implements the same semantics on our edge-cut plans, where the owner
of a destination plays DRPA's root and every sender a leaf. Exactly:

Mean aggregation of destination v at a layer's t-th training pass (t = 0, 1, ...; one pass
per epoch) is

    y_v = (sum_{u in N_local(v)} x_u + sum_{k in A_t(v)} a_k) / (deg_local(v) + sum_{k in A_t(v)} c_k)

(0 where the denominator is 0), with a_k a received row of the plan's send buffer (a PRE
partial sum of c_k sources, or a POST source row, c_k = 1 per destination it serves) and
A_t(v) the rows that arrive for v at pass t. Like DRPA, the degree counts only what
arrived, so 0c is training on the graph with the cut edges removed.

* Buckets. Each sender cuts its block of rows for each peer into r contiguous chunks
  (chunk q holds rows floor(q n / r) .. floor((q + 1) n / r) - 1 of an n-row block). DRPA
  cuts a partition's split vertices, in local id order, into r contiguous chunks; there a
  vertex has copies on several partitions, here the send buffer is grouped by peer, so
  cutting each peer's block keeps every bucket about 1/r of every peer's traffic.
* Pass t computes the rows of bucket t mod r from the current input and starts sending
  them (a nonblocking Alltoallv, awaited r passes later). They are added at pass t + r,
  in place of nothing: A_t is the bucket t mod r computed at pass t - r, and passes t < r
  receive nothing (local neighbours and local degree only, as DRPA's first r epochs).
  A bucket's remote rows thus reach their destination once every r epochs, r epochs old.
* Backward. Arrived rows are constants (DRPA's backward returns the gradient unchanged):
  dL/dx = L^T (G / deg_t), local only; no gradient is exchanged, so a cd-r epoch sends
  one bucket forward per layer and nothing backward.
* Evaluation uses the exact synchronous aggregation, as DistGNN evaluates on the whole
  graph, so accuracies are comparable across schedules.
* DRPA's roots also send their updated sums back to their leaves (copies of the same
  vertex); with an edge cut a vertex has no copies, so that half has no counterpart.

Only the mean aggregation (GraphSAGE) is defined this way, as in DistGNN.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import scipy.sparse as sp
import torch

from supergcn.distributed.operators import SparseOperator
from supergcn.kernels.ranges import block_starts, concatenated_ranges
from supergcn.naming import schedule_delay


def bucket_rows(counts: np.ndarray, delay: int, bucket: int) -> tuple[np.ndarray, np.ndarray]:
    """(buffer rows of ``bucket``, its rows per peer) in a buffer of peer blocks of
    ``counts`` rows: rows floor(q n / r) .. floor((q + 1) n / r) - 1 of each n-row block."""
    counts = np.asarray(counts, dtype=np.int64)
    first = counts * bucket // delay
    sizes = counts * (bucket + 1) // delay - first
    return concatenated_ranges(block_starts(counts) + first, sizes), sizes


class _Arrived:
    """Rows already received (restored from a checkpoint), in place of a pending exchange."""

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = rows

    def wait(self) -> np.ndarray:
        return self.rows


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


class DelayedAggregation:
    """The mean aggregation of one rank under a cd-r (r >= 1) or 0c schedule (module
    docstring), on the rank's :class:`~supergcn.distributed.rank_operators.RankOperators`."""

    def __init__(self, operators, schedule: str) -> None:
        delay = schedule_delay(schedule)
        if delay == 0:
            raise ValueError("cd-0 is the synchronous exchange: run it with RankOperators")
        self.delay = delay  # None: 0c
        self.operators = operators
        self.local_degree = torch.from_numpy(np.diff(operators.plan.local_indptr).astype(np.float32))
        self.passes = 0        # training passes begun (one per epoch)
        self._in_flight: dict[int, deque] = {}  # per layer, oldest first
        self.buckets: list[_Bucket] = []
        if delay is not None:
            matrices = operators.plan.matrices()
            received_sources = operators.coefficients(True, None)  # c_k: a gradient row's sources
            self.buckets = [_Bucket(matrices["send"], matrices["remote"], delay, q, operators.send_counts,
                                    operators.recv_counts, received_sources, operators.local.kernel)
                            for q in range(delay)]

    def begin_pass(self) -> None:
        """Start a training pass (an epoch's forward)."""
        self.passes += 1

    def forward(self, x: torch.Tensor, layer: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(y, 1 / degree) of the pass's ``layer``-th aggregation."""
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
        inv_degree = torch.where(degree > 0, 1.0 / degree.clamp(min=1), torch.zeros_like(degree))
        with timer.phase("aggregation"):
            return out.mul_(inv_degree[:, None]), inv_degree

    def backward(self, grad: torch.Tensor, inv_degree: torch.Tensor) -> torch.Tensor:
        with self.operators.timer.phase("aggregation"):
            return self.operators.local.matmul(grad * inv_degree[:, None], transpose=True)

    def state(self) -> dict:
        """What a checkpoint needs to continue exactly: the passes and the rows in flight
        (awaited here; every rank has started them, so waiting ends)."""
        in_flight = {layer: [entry.wait().copy() for entry in queue] for layer, queue in self._in_flight.items()}
        self.restore({"passes": self.passes, "in_flight": in_flight})
        return {"passes": self.passes, "in_flight": in_flight}

    def restore(self, state: dict) -> None:
        self.passes = state["passes"]
        self._in_flight = {layer: deque(_Arrived(rows) for rows in rows_list)
                           for layer, rows_list in state["in_flight"].items()}

    def drain(self) -> None:
        """Wait for every exchange still in flight (before the communicator is closed)."""
        for queue in self._in_flight.values():
            for entry in queue:
                entry.wait()
        self._in_flight.clear()


class DelayedMean(torch.autograd.Function):
    """The delayed mean aggregation as a differentiable operator (local gradient only)."""

    @staticmethod
    def forward(ctx, x, delayed: DelayedAggregation, layer: int):
        out, ctx.inv_degree = delayed.forward(x.detach(), layer)
        ctx.delayed = delayed
        return out

    @staticmethod
    def backward(ctx, grad):
        return ctx.delayed.backward(grad.contiguous(), ctx.inv_degree), None, None
