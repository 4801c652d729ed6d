"""BNS-GCN's boundary node sampling (Wan et al., MLSys '22): each epoch every rank sends a
random share p of its boundary rows, scaled up by the share's inverse, and the edges of
the others are dropped for that epoch.

With the rank's operators of :mod:`supergcn.distributed.rank_operators` (L the local CSR,
S the send operator, one row per send-buffer row; R the receive side's CSR; D the row
scale, the full graph's degrees), at each training pass (one per epoch) rank i draws, for
each peer j, k_ij = floor(p n_ij) of the n_ij rows it sends j, uniformly without
replacement, and sends their positions once (int64 ids). With S_p the drawn rows of S,
R_p the columns of R they arrive in and c_ij = n_ij / k_ij, every aggregation of the pass
is

    Y = D (L X + R_p C S_p X),      dLoss/dX = L^T D G + S_p^T C R_p^T D G,

C the diagonal of each drawn row's c: rows are sent as ``c · (S_p X)`` and their gradients
come back and are scaled by c on arrival. For any fixed X, E[R_p C S_p X] = R S X: each row
is drawn with probability k/n, so the sampled aggregation is unbiased (BNS-GCN §3.2).
The public code (``GATECH-EIC/BNS-GCN``, ``train.py`` ``get_send_size``,
``helper/feature_buffer.py``) sends ``feat[selected] / ratio`` with ratio = k / n and scales
the returned gradients by 1 / ratio the same way; normalisation keeps the full graph's
degrees; evaluation exchanges every row (here: the exact exchange).

Bytes per epoch: 8 sum_ij k_ij for the ids, plus, at every layer that exchanges, forward
and back, sum_ij k_ij rows of the layer's width in float32. p = 1 draws every row in
order, so it computes what the plain exchange does, bit for bit (but sends the ids);
p = 0 calls no exchange at all.

Plans. BNS-GCN samples boundary nodes, the POST rows of a ``post`` plan. The same draw on a
``pre`` or ``hybrid`` plan samples partial aggregates (a PRE row is the sum of a
destination's neighbours on the sender), and stays unbiased for the same reason: any row
of S X drawn with probability k/n and scaled by n/k has its own expectation. Its variance
differs: a PRE row carries several edges to one destination, dropped or kept together.
No published system samples PRE rows (docs/methods.md measures it).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from supergcn.distributed.operators import SparseOperator
from supergcn.distributed.rank_operators import Exchange
from supergcn.kernels.ranges import block_starts

#: The third number of a BNS-GCN draw's random stream, after the run's seed and the rank
#: (and before the pass), so that it shares no stream with the others a run draws.
SAMPLING_STREAM = 0xB45


def sampled_counts(rate: float, counts: np.ndarray) -> np.ndarray:
    """k = floor(rate · n) rows of each block of n, as BNS-GCN computes it (``int(p * n)``).

    Args:
        rate: the share p, in [0, 1].
        counts: rows per peer.

    Returns:
        The rows drawn per peer.
    """
    return np.array([int(rate * int(n)) for n in counts], dtype=np.int64)


def draw_rows(rng: np.random.Generator, counts: np.ndarray, sampled: np.ndarray) -> np.ndarray:
    """The drawn rows of a buffer of peer blocks: ``sampled[j]`` of block j's ``counts[j]``,
    uniformly without replacement, in increasing order (every row where all are drawn).

    Args:
        rng: the pass's random stream.
        counts: rows per peer block.
        sampled: rows to draw per block.

    Returns:
        Their positions in the buffer, increasing.
    """
    starts = block_starts(counts)
    blocks = [start + (np.arange(n) if k == n else np.sort(rng.choice(n, k, replace=False)))
              for start, n, k in zip(starts, counts, sampled)]
    return np.concatenate(blocks).astype(np.int64) if blocks else np.zeros(0, dtype=np.int64)


class BoundarySampling:
    """One rank's exchange under BNS-GCN's boundary sampling (module docstring): ``forward``
    and ``backward`` as :class:`~supergcn.distributed.rank_operators.RankOperators`' own, so
    that it drives the same differentiable operator.

    Args:
        operators: the rank's operators and exchange counts.
        rate: the share p of each peer's rows drawn per pass, in [0, 1].
        seed: the run's seed (with the rank and the pass, the draw's stream).

    Raises:
        ValueError: a rate outside [0, 1].
    """

    def __init__(self, operators, rate: float, seed: int) -> None:
        if not 0 <= rate <= 1:
            raise ValueError(f"boundary rate {rate} is not in [0, 1]")
        self.operators = operators
        self.rate = rate
        self.seed = seed
        self.passes = 0
        self.send_sampled = sampled_counts(rate, operators.send_counts)
        self.recv_sampled = sampled_counts(rate, operators.recv_counts)  # each peer's k for this rank
        matrices = operators.plan.matrices()
        self._send_matrix = matrices["send"].tocsr()
        self._remote_matrix = matrices["remote"].tocsc()
        scale = np.where(self.send_sampled > 0, operators.send_counts / np.maximum(self.send_sampled, 1), 0.0)
        self._scale = torch.from_numpy(np.repeat(scale, self.send_sampled).astype(np.float32))[:, None]
        self._scales = bool((scale[self.send_sampled > 0] != 1).any())
        self.send: SparseOperator | None = None
        self.remote: SparseOperator | None = None

    @property
    def exchanges(self) -> bool:
        """Whether any row crosses ranks (not at p = 0, where no exchange is called)."""
        return self.rate > 0

    def begin_pass(self) -> None:
        """Start a training pass: draw its rows and tell each peer which (collective)."""
        self.passes += 1
        operators = self.operators
        rng = np.random.default_rng([self.seed, operators.communicator.rank, SAMPLING_STREAM, self.passes])
        sent = draw_rows(rng, operators.send_counts, self.send_sampled)
        if self.exchanges:
            with operators.timer.phase("communication"):
                in_block = (sent - np.repeat(block_starts(operators.send_counts), self.send_sampled))[:, None]
                arrived = operators.communicator.ialltoallv(np.ascontiguousarray(in_block), self.send_sampled,
                                                            self.recv_sampled, kind="ids").wait()[:, 0]
            received = np.repeat(block_starts(operators.recv_counts), self.recv_sampled) + arrived
        else:
            received = np.zeros(0, dtype=np.int64)
        with operators.timer.phase("aggregation"):
            kernel = operators.local.kernel
            self.send = SparseOperator(self._send_matrix[sent], kernel)
            self.remote = SparseOperator(sp.csr_matrix(self._remote_matrix[:, received]), kernel)

    def _start(self, rows: torch.Tensor, reverse: bool) -> Exchange:
        """Start sending the drawn ``rows`` (their gradients, ``reverse``)."""
        counts = (self.recv_sampled, self.send_sampled) if reverse else (self.send_sampled, self.recv_sampled)
        with self.operators.timer.phase("communication"):
            pending = self.operators.communicator.ialltoallv(rows.numpy(), *counts)

        def finish() -> torch.Tensor:
            with self.operators.timer.phase("communication"):
                return torch.from_numpy(pending.wait())
        return Exchange([pending], finish)

    def forward(self, x: torch.Tensor, row_scale: torch.Tensor | None, layer: int) -> torch.Tensor:
        """Y of the pass's ``layer``-th aggregation (module docstring)."""
        operators, timer = self.operators, self.operators.timer
        if not self.exchanges:
            with timer.phase("aggregation"):
                return operators.local.matmul(x, row_scale=row_scale)
        with timer.phase("aggregation"):
            rows = self.send.matmul(x)
            if self._scales:
                rows.mul_(self._scale)
        out, received = operators.local_beside(self._start(rows, reverse=False), x)
        with timer.phase("aggregation"):
            return self.remote.matmul(received, out=out, accumulate=True, row_scale=row_scale)

    def backward(self, grad: torch.Tensor, row_scale: torch.Tensor | None, layer: int) -> torch.Tensor:
        """dLoss/dX of the pass's ``layer``-th aggregation (module docstring)."""
        operators, timer = self.operators, self.operators.timer
        with timer.phase("aggregation"):
            grad = grad.contiguous() if row_scale is None else grad * row_scale[:, None]
            if not self.exchanges:
                return operators.local.matmul(grad, transpose=True)
            grad_received = self.remote.t_matmul(grad)
        grad_x, grad_sent = operators.local_beside(self._start(grad_received, reverse=True), grad, transpose=True)
        with timer.phase("aggregation"):
            if self._scales:
                grad_sent = grad_sent * self._scale
            return self.send.t_matmul(grad_sent, out=grad_x, accumulate=True)

    def state(self) -> dict:
        """What a checkpoint needs to continue exactly: the passes (each pass's draw follows
        from the seed, the rank and the pass)."""
        return {"passes": self.passes}

    def restore(self, state: dict) -> None:
        """Continue from :meth:`state`'s result."""
        self.passes = state["passes"]

    def drain(self) -> None:
        """Nothing stays in flight between passes."""
