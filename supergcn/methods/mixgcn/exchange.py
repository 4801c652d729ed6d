"""MixGCN's mixture of parallelism on one rank (its maths: :mod:`supergcn.methods.mixgcn`):
the aggregation of a slice of the feature columns of every row over a copy of the whole
adjacency, between two all-to-all transposes."""


from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from supergcn.data.graph import load_graph
from supergcn.distributed.comm import Communicator
from supergcn.distributed.operators import SparseOperator
from supergcn.distributed.protocol import RankMethod
from supergcn.distributed.timing import PhaseTimer
from supergcn.kernels.ranges import even_bounds
from supergcn.plan.rank_plan import RankPlan


def transpose_values(rows: np.ndarray, width: int) -> int:
    """Values one transpose of a ``width``-wide matrix moves between ranks owning ``rows[i]``
    rows each: ``N·d − Σ_i n_i·c_i`` (module docstring).

    Args:
        rows: rows per rank.
        width: columns.

    Returns:
        The number of float32 values sent, over all ranks.
    """
    rows = np.asarray(rows, dtype=np.int64)
    columns = np.diff(even_bounds(width, len(rows)))
    return int(rows.sum() * width - (rows * columns).sum())


def epoch_transpose_values(rows: np.ndarray, widths: list[int]) -> int:
    """Values a training epoch's transposes move, over all ranks, for layers of input
    widths ``widths`` (module docstring): every layer's column → row transpose forward, and
    both transposes forward and backward at every layer but the first.

    Args:
        rows: rows per rank.
        widths: each layer's input width, first layer first.

    Returns:
        The number of float32 values sent in one epoch, over all ranks.
    """
    return sum(transpose_values(rows, w) for w in widths) + 3 * sum(transpose_values(rows, w) for w in widths[1:])


class FeatureParallelAggregation(RankMethod):
    """One rank's MoP aggregation (:mod:`supergcn.methods.mixgcn`): the exchange of every pass
    (:class:`~supergcn.distributed.protocol.Exchange`), exact, on the rank's rows.

    Building it is collective: every rank's row count and node ids are gathered, and the
    whole graph is read (memory-mapped) and renumbered into the ranks' row order.

    Args:
        plan: the rank's plan (its owned nodes and their original ids).
        graph: the prepared graph directory.
        communicator: the job's communicator.
        timer: the rank's phase timer.
        kernel: the sparse kernels (``numba`` or ``torch``).
        input_is_plain: layer 0's input is the features themselves, so its column slice is
            transposed once and kept.
    """

    in_evaluation = True  # the aggregation of every pass
    exact = True
    owns_normalisation = False

    def __init__(self, plan: RankPlan, graph, communicator: Communicator, timer: PhaseTimer, kernel: str,
                 input_is_plain: bool) -> None:
        self.communicator, self.timer = communicator, timer
        self.rank, self.size = communicator.rank, communicator.size
        comm = communicator.comm
        self.rows = np.array(comm.allgather(plan.num_owned), dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.rows)])
        order = np.empty(int(self.offsets[-1]), dtype=np.int64)
        comm.Allgatherv(np.ascontiguousarray(plan.owned_old_ids, dtype=np.int64), [order, self.rows.tolist()])
        # The stored graph is symmetric (supergcn.data.graph), and so is its renumbering: Âᵀ = Â.
        self.adjacency = SparseOperator(_renumbered(load_graph(graph, mmap=True), order), kernel, symmetric=True)
        self.replicated_bytes = self.adjacency.nbytes
        self.input_is_plain = input_is_plain
        self._input_columns: torch.Tensor | None = None

    @property
    def exchange(self) -> FeatureParallelAggregation:
        """The method is its exchange."""
        return self

    @property
    def num_nodes(self) -> int:
        """N, the rows of every column slice."""
        return int(self.offsets[-1])

    def to_columns(self, rows: torch.Tensor) -> torch.Tensor:
        """The row → column transpose: this rank's ``n_i × d`` rows in, its N × c_i column
        slice of all ranks' rows out (collective).

        Args:
            rows: the rank's rows.

        Returns:
            N × c_i.
        """
        rows = rows.detach().contiguous()
        if self.size == 1:  # one rank's rows are all rows, its columns all columns
            return rows
        bounds = even_bounds(rows.shape[1], self.size)
        mine = slice(bounds[self.rank], bounds[self.rank + 1])
        width = mine.stop - mine.start
        with self.timer.phase("communication"):
            peers = [j for j in range(self.size) if j != self.rank]
            send = np.concatenate([rows[:, bounds[j]:bounds[j + 1]].numpy().ravel() for j in peers]
                                  + [np.empty(0, np.float32)])
            send_counts = np.zeros(self.size, dtype=np.int64)
            send_counts[peers] = [self.rows[self.rank] * (bounds[j + 1] - bounds[j]) for j in peers]
            recv_counts = self.rows * width
            recv_counts[self.rank] = 0
            columns = np.empty((self.num_nodes, width), dtype=np.float32)
            displacements = (np.concatenate([[0], np.cumsum(send_counts)[:-1]]), self.offsets[:-1] * width)
            pending = self.communicator.ialltoallv(send[:, None], send_counts, recv_counts,
                                                   out=columns.reshape(-1, 1), displacements=displacements)
            columns[self.offsets[self.rank]:self.offsets[self.rank + 1]] = rows[:, mine].numpy()
            pending.wait()
        return torch.from_numpy(columns)

    def to_rows(self, columns: torch.Tensor, width: int) -> torch.Tensor:
        """The column → row transpose: this rank's N × c_i slice in, its ``n_i × width`` rows
        out (collective).

        Args:
            columns: the rank's column slice of all rows.
            width: the full width d.

        Returns:
            The rank's rows.
        """
        if self.size == 1:
            return columns
        columns = columns.contiguous().numpy()
        bounds = even_bounds(width, self.size)
        mine = columns.shape[1]
        n = int(self.rows[self.rank])
        with self.timer.phase("communication"):
            send_counts = self.rows * mine
            send_counts[self.rank] = 0
            recv_counts = n * np.diff(bounds)
            recv_counts[self.rank] = 0
            received = np.empty(int(recv_counts.sum()), dtype=np.float32)
            displacements = (self.offsets[:-1] * mine, np.concatenate([[0], np.cumsum(recv_counts)[:-1]]))
            pending = self.communicator.ialltoallv(columns.reshape(-1, 1), send_counts, recv_counts,
                                                   out=received[:, None], displacements=displacements)
            out = np.empty((n, width), dtype=np.float32)
            own_rows = slice(self.offsets[self.rank], self.offsets[self.rank + 1])
            out[:, bounds[self.rank]:bounds[self.rank + 1]] = columns[own_rows]
            pending.wait()
            for j, start in zip(range(self.size), displacements[1]):
                if j != self.rank:
                    out[:, bounds[j]:bounds[j + 1]] = received[start:start + recv_counts[j]].reshape(n, -1)
        return torch.from_numpy(out)

    def forward(self, x: torch.Tensor, row_scale: torch.Tensor | None, layer: int) -> torch.Tensor:
        """``diag(row_scale) Â x`` on the rank's rows (collective).

        Args:
            x: the rank's ``n_i × d`` rows.
            row_scale: a factor per row, or None.
            layer: the aggregation's layer in the pass (0 may reuse the input's columns).

        Returns:
            The rank's ``n_i × d`` aggregated rows.
        """
        if layer == 0 and self.input_is_plain:
            if self._input_columns is None:  # Alg. 2 holds the features in column slices from the start
                self._input_columns = self.to_columns(x)
            columns = self._input_columns
        else:
            columns = self.to_columns(x)
        with self.timer.phase("aggregation"):
            aggregated = self.adjacency.matmul(columns)
        return self._scaled(self.to_rows(aggregated, x.shape[1]), row_scale)

    def backward(self, grad: torch.Tensor, row_scale: torch.Tensor | None, layer: int) -> torch.Tensor:
        """``Âᵀ diag(row_scale) grad`` on the rank's rows (collective).

        Args:
            grad: the gradient of the rank's aggregated rows.
            row_scale: the forward's factor per row, or None.
            layer: the aggregation's layer in the pass.

        Returns:
            The gradient of the rank's input rows.
        """
        columns = self.to_columns(self._scaled(grad, row_scale))
        with self.timer.phase("aggregation"):
            aggregated = self.adjacency.matmul(columns, transpose=True)
        return self.to_rows(aggregated, grad.shape[1])

    def _scaled(self, rows: torch.Tensor, row_scale: torch.Tensor | None) -> torch.Tensor:
        if row_scale is None:
            return rows
        with self.timer.phase("aggregation"):
            return rows * row_scale[:, None]

    def begin_pass(self) -> None:
        """Nothing carries from one pass to the next but the input's columns."""

    def header(self) -> dict | None:
        """What the run's metrics header records of the split (collective: rank 0 gets the
        list over ranks, the others None): rows, replicated adjacency bytes and aggregation
        entries (``nnz(Â)``) per rank.

        Returns:
            ``{"rows": [...], "replicated_adjacency_bytes": [...], "adjacency_entries": int}`` on rank 0.
        """
        gathered = self.communicator.comm.gather(self.replicated_bytes, root=0)
        if self.rank != 0:
            return None
        return {"rows": self.rows.tolist(), "replicated_adjacency_bytes": gathered,
                "adjacency_entries": int(self.adjacency.nnz)}


def build(context) -> FeatureParallelAggregation:
    """The rank's MoP aggregation (collective: the ranks' rows are gathered and the whole graph
    read).

    Args:
        context: the rank's :class:`~supergcn.train.steps.RankContext`.

    Returns:
        The method's state on this rank.
    """
    config = context.config
    return FeatureParallelAggregation(context.operators.plan, config.graph, context.communicator, context.timer,
                                      config.kernel, config.input_is_plain)


def _renumbered(graph, order: np.ndarray) -> sp.csr_matrix:
    """The graph's adjacency with node ``order[k]`` as row and column k (the ranks' rows
    one after another), 0/1 float32 entries."""
    indptr, indices = np.asarray(graph.indptr), np.asarray(graph.indices)
    position = np.empty(len(order), dtype=indices.dtype)
    position[order] = np.arange(len(order), dtype=indices.dtype)
    degree = np.diff(indptr)[order]
    new_indptr = np.concatenate([[0], np.cumsum(degree)]).astype(np.int64)
    # Entry e of new row k is old entry indptr[order[k]] + (e − new_indptr[k]).
    source = np.repeat(indptr[order] - new_indptr[:-1], degree) + np.arange(new_indptr[-1], dtype=np.int64)
    new_indices = position[indices[source]]
    del source
    return sp.csr_matrix((np.ones(len(new_indices), dtype=np.int8), new_indices, new_indptr),
                         shape=(len(order), len(order)))
