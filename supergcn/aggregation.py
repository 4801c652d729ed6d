"""Distributed neighbour aggregation as a differentiable operator.

For rank i with owned features X_i (n_i x F), the *sum* aggregation over the global graph
restricted to rank i's destinations is

    S_i = L_i X_i + R_i B_i,      B_i = concat_j ( P_{j->i} X_j ; X_j[post_{j->i}] ),

with L the local CSR, P the pre-aggregation CSR, R the post-aggregation CSR over the
receive buffer B (see :mod:`supergcn.plan`). Forward: pre-aggregate and gather the send
buffer, exchange it (Alltoallv), then ``L X + R B``. Backward is the transpose: with
G = dL/dS,

    dL/dX_i = L_i^T G_i + P_i^T H_i[pre] + scatter_add(post_i, H_i[post]),
    H = exchange^T(R^T G)     (the same Alltoallv with send and receive counts swapped).

Mean (GraphSAGE) and symmetric (GCN) normalisations are diagonal scalings around S and
are left to autograd in :class:`GraphOps`. The sparse products here use torch's CSR
kernels (the reference path).
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
import torch

from supergcn.comm import Communicator
from supergcn.plan import RankPlan
from supergcn.timing import PhaseTimer

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")


class CsrOperator:
    """A fixed sparse matrix A with unit weights, applying A x and A^T x to dense x."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, num_cols: int) -> None:
        matrix = sp.csr_matrix((np.ones(len(indices), dtype=np.float32), indices, indptr),
                               shape=(len(indptr) - 1, num_cols))
        self.shape = matrix.shape
        self.nnz = matrix.nnz
        self._forward = self._to_torch(matrix)
        self._transpose = self._to_torch(matrix.T.tocsr())

    @staticmethod
    def _to_torch(matrix: sp.csr_matrix) -> torch.Tensor:
        matrix.sort_indices()
        return torch.sparse_csr_tensor(torch.from_numpy(matrix.indptr.astype(np.int64)),
                                       torch.from_numpy(matrix.indices.astype(np.int64)),
                                       torch.from_numpy(matrix.data), size=matrix.shape, check_invariants=False)

    @staticmethod
    def _apply(matrix: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        if matrix.shape[0] == 0 or matrix.shape[1] == 0 or matrix._nnz() == 0:
            return x.new_zeros((matrix.shape[0], x.shape[1]))
        return torch.sparse.mm(matrix, x)

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        return self._apply(self._forward, x)

    def t_matmul(self, x: torch.Tensor) -> torch.Tensor:
        return self._apply(self._transpose, x)


class RankOperators:
    """Everything one rank needs to aggregate: its plan's operators and buffer layout."""

    def __init__(self, plan: RankPlan, communicator: Communicator, timer: PhaseTimer) -> None:
        self.plan = plan
        self.communicator = communicator
        self.timer = timer
        n = plan.num_owned
        self.local = CsrOperator(plan.local_indptr, plan.local_indices, n)
        self.pre = CsrOperator(plan.pre_indptr, plan.pre_indices, n)
        self.remote = CsrOperator(plan.remote_indptr, plan.remote_indices, int(plan.recv_counts.sum()))
        pre_pos, post_pos = plan.send_positions()
        self.pre_pos = torch.from_numpy(pre_pos)
        self.post_pos = torch.from_numpy(post_pos)
        self.post_index = torch.from_numpy(plan.post_send_index.astype(np.int64))
        self.send_counts = plan.send_counts
        self.recv_counts = plan.recv_counts
        self.num_send = int(plan.send_counts.sum())

    def exchange(self, rows: torch.Tensor, reverse: bool = False) -> torch.Tensor:
        send_counts, recv_counts = (self.recv_counts, self.send_counts) if reverse else (self.send_counts,
                                                                                          self.recv_counts)
        with self.timer.phase("communication"):
            received = self.communicator.alltoallv(rows.contiguous().numpy(), send_counts, recv_counts)
        return torch.from_numpy(received)

    def forward_sum(self, x: torch.Tensor) -> torch.Tensor:
        with self.timer.phase("aggregation"):
            send = x.new_empty((self.num_send, x.shape[1]))
            send[self.pre_pos] = self.pre.matmul(x)
            send[self.post_pos] = x[self.post_index]
        received = self.exchange(send)
        with self.timer.phase("aggregation"):
            return self.local.matmul(x) + self.remote.matmul(received)

    def backward_sum(self, grad: torch.Tensor) -> torch.Tensor:
        with self.timer.phase("aggregation"):
            grad = grad.contiguous()
            grad_received = self.remote.t_matmul(grad)
        grad_send = self.exchange(grad_received, reverse=True)
        with self.timer.phase("aggregation"):
            grad_x = self.local.t_matmul(grad)
            grad_x += self.pre.t_matmul(grad_send[self.pre_pos].contiguous())
            grad_x.index_add_(0, self.post_index, grad_send[self.post_pos])
            return grad_x


class _DistributedSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, operators: RankOperators):
        ctx.operators = operators
        return operators.forward_sum(x.detach().contiguous())

    @staticmethod
    def backward(ctx, grad):
        return ctx.operators.backward_sum(grad), None


class GraphOps:
    """Normalised aggregations of one rank, differentiable through the exchange.

    * ``mean(x)[v] = (1/deg(v)) * sum_{u in N(v)} x[u]`` (0 for isolated v), deg global;
    * ``gcn(x)[v] = d(v)^{-1/2} * sum_{u in N(v) ∪ {v}} d(u)^{-1/2} x[u]``, d = |N(v) ∪ {v}|
      (PyG's ``gcn_norm`` with ``add_remaining_self_loops``).
    """

    def __init__(self, operators: RankOperators) -> None:
        self.operators = operators
        plan = operators.plan
        degree = torch.from_numpy(plan.in_degree.astype(np.float32))
        self.inv_degree = torch.where(degree > 0, 1.0 / degree.clamp(min=1), torch.zeros_like(degree))[:, None]
        rows = np.repeat(np.arange(plan.num_owned), np.diff(plan.local_indptr))
        has_loop = np.zeros(plan.num_owned, dtype=bool)
        has_loop[rows[plan.local_indices == rows]] = True
        self.missing_loop = torch.from_numpy((~has_loop).astype(np.float32))[:, None]
        self.inv_sqrt_gcn_degree = (degree[:, None] + self.missing_loop).rsqrt()

    def sum(self, x: torch.Tensor) -> torch.Tensor:
        return _DistributedSum.apply(x, self.operators)

    def mean(self, x: torch.Tensor) -> torch.Tensor:
        return self.sum(x) * self.inv_degree

    def gcn(self, x: torch.Tensor) -> torch.Tensor:
        scaled = x * self.inv_sqrt_gcn_degree
        return (self.sum(scaled) + self.missing_loop * scaled) * self.inv_sqrt_gcn_degree
