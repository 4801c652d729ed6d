"""BNS-GCN's sampled exchange on one rank (its maths: :mod:`supergcn.methods.bnsgcn`): each
training pass draws a share of the boundary rows, sends them scaled up and drops the
others' edges."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch

from supergcn.distributed.operators import SparseOperator
from supergcn.distributed.protocol import RankMethod
from supergcn.distributed.rank_operators import InFlight
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


class BoundarySampling(RankMethod):
    """One rank's exchange under BNS-GCN's boundary sampling (:mod:`supergcn.methods.bnsgcn`):
    the exchange of its training passes (:class:`~supergcn.distributed.protocol.Exchange`).

    Args:
        operators: the rank's operators and exchange counts.
        rate: the share p of each peer's rows drawn per pass, in [0, 1].
        seed: the run's seed (with the rank and the pass, the draw's stream).

    Raises:
        ValueError: a rate outside [0, 1].
    """

    in_evaluation = False  # BNS-GCN evaluates on the full graph: the exact exchange
    exact = False
    owns_normalisation = False

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
    def exchange(self) -> BoundarySampling:
        """The method is its exchange."""
        return self

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

    def _start(self, rows: torch.Tensor, reverse: bool) -> InFlight:
        """Start sending the drawn ``rows`` (their gradients, ``reverse``)."""
        counts = (self.recv_sampled, self.send_sampled) if reverse else (self.send_sampled, self.recv_sampled)
        with self.operators.timer.phase("communication"):
            pending = self.operators.communicator.ialltoallv(rows.numpy(), *counts)

        def finish() -> torch.Tensor:
            with self.operators.timer.phase("communication"):
                return torch.from_numpy(pending.wait())
        return InFlight([pending], finish)

    def forward(self, x: torch.Tensor, row_scale: torch.Tensor | None, layer: int) -> torch.Tensor:
        """Y of the pass's ``layer``-th aggregation (:mod:`supergcn.methods.bnsgcn`)."""
        operators = self.operators
        if not self.exchanges:
            with operators.timer.phase("aggregation"):
                return operators.local.matmul(x, row_scale=row_scale)
        return operators.through(x, lambda rows: self._start(rows, reverse=False), self.send, self.remote, row_scale,
                                 sent_scale=self._scale if self._scales else None)

    def backward(self, grad: torch.Tensor, row_scale: torch.Tensor | None, layer: int) -> torch.Tensor:
        """dLoss/dX of the pass's ``layer``-th aggregation (:mod:`supergcn.methods.bnsgcn`)."""
        operators = self.operators
        if not self.exchanges:
            with operators.timer.phase("aggregation"):
                grad = grad.contiguous() if row_scale is None else grad * row_scale[:, None]
                return operators.local.matmul(grad, transpose=True)
        return operators.through_transposed(grad, lambda rows: self._start(rows, reverse=True), self.send,
                                            self.remote, row_scale, sent_scale=self._scale if self._scales else None)

    def state(self) -> dict:
        """What a checkpoint needs to continue exactly: the passes (each pass's draw follows
        from the seed, the rank and the pass)."""
        return {"passes": self.passes}

    def restore(self, state: dict) -> None:
        """Continue from :meth:`state`'s result."""
        self.passes = state["passes"]

    def close(self) -> None:
        """Nothing stays in flight between passes."""


def build(context) -> BoundarySampling:
    """The rank's sampled exchange at ``context.config.boundary_rate``.

    Args:
        context: the rank's :class:`~supergcn.train.steps.RankContext`.

    Returns:
        The method's state on this rank.
    """
    return BoundarySampling(context.operators, context.config.boundary_rate, context.config.seed)
