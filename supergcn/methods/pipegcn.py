"""PipeGCN's pipelined exchange (Wan et al., ICLR '22): every boundary row and boundary
gradient one epoch stale, the exchange of an epoch running behind the next epoch's compute.

With the rank's operators of :mod:`supergcn.distributed.rank_operators` (L the local CSR,
S the send operator, R the receive side's CSR, D the row scale), a layer's aggregation at
training pass t (t = 1, 2, ...; one pass per epoch) is

    Y_t = D (L X_t + R B_{t-1}),          B_{t-1} = exchange(S X_{t-1}),          B_0 = 0,

and its backward, with G_t = dLoss/dY_t,

    dLoss/dX_t = L^T D G_t + S^T H_{t-1},  H_{t-1} = exchange^T(R^T D G_{t-1}),  H_0 = 0.

Pass t starts the exchanges of S X_t and of R^T D G_t (nonblocking Alltoallv, polled while
the local aggregation runs) and waits for them at pass t + 1, where their rows are used:
the exchange moves exactly the synchronous exchange's bytes and has a whole epoch of
compute to hide behind. PipeGCN's public code does the same with a thread pool, its
buffers zero at epoch 0 (``GATECH-EIC/PipeGCN`` ``helper/feature_buffer.py``).

* Smoothing (``pipe-f``, ``pipe-g``, ``pipe-fg``; PipeGCN's ``--feat-corr`` and
  ``--grad-corr``): the features, gradients or both are replaced by a moving average of what
  arrives, A_t = gamma A_{t-1} + (1 - gamma) B_{t-1}, zero-initialised and without bias
  correction (A_1 = 0), gamma = 0.95 unless set.
* Strategies. The aggregation is linear, so R B_{t-1} = A_remote X_{t-1} whether B holds
  PRE partial sums or POST source rows: pre, post and hybrid plans train the same model up
  to float rounding (PipeGCN's is post), and hybrid's fewer rows are what goes stale.
* Models. Defined where a layer's aggregation is a row-scaled sum of rows (SAGE, GCN,
  GIN: :attr:`~supergcn.models.card.ModelCard.linear_aggregation`); GAT's softmax takes
  its scores and maxima over all of a destination's neighbours at once, which a stale
  exchange of rows alone does not define.
* Layers aggregate before they transform (the trainer sets it, as PipeGCN's layers do), so
  the stale rows are a layer's input at t - 1 multiplied by pass t's weights; a
  transform-first layer would make the weights stale too.
* Evaluation uses the exact synchronous exchange, as PipeGCN evaluates on the full graph.

How it differs from DistGNN's cd-1 (:mod:`supergcn.methods.distgnn`), which also adds each
remote row one epoch late: cd-1 sends partial aggregates forward only (its arrived rows are
constants, so no gradient crosses ranks; PipeGCN returns the boundary gradients, one epoch
stale too), divides by the degree of what arrived (local only at the first pass; PipeGCN by
the full degree, with zeros in place of the remote rows), is defined for the mean of a
``pre`` plan only, and sends half PipeGCN's bytes (``tests/methods/test_pipegcn.py`` shows
each difference).
"""

from __future__ import annotations

import numpy as np
import torch

from supergcn.naming import PIPELINED_SCHEDULES


class _Arrived:
    """Rows already received (restored from a checkpoint), in place of a pending exchange."""

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = rows

    def wait(self) -> np.ndarray:
        return self.rows

    def test(self) -> bool:
        return True


class _StaleRows:
    """One layer's exchange in one direction: the exchange started at the previous pass and
    the moving average of what arrived (where smoothed)."""

    def __init__(self, smooth: bool, momentum: float) -> None:
        self.smooth = smooth
        self.momentum = momentum
        self.pending = None          # started at the previous pass
        self.average: np.ndarray | None = None

    def take(self, shape: tuple[int, int]) -> np.ndarray:
        """The rows the previous pass sent (zeros at the first), or their moving average."""
        received = np.zeros(shape, dtype=np.float32) if self.pending is None else self.pending.wait()
        self.pending = None
        if not self.smooth:
            return received
        if self.average is None:
            self.average = np.zeros(shape, dtype=np.float32)
        self.average *= self.momentum
        self.average += (1 - self.momentum) * received
        return self.average

    def state(self) -> dict:
        pending = None if self.pending is None else self.pending.wait().copy()
        self.pending = None if pending is None else _Arrived(pending)
        return {"pending": pending, "average": self.average}

    def restore(self, state: dict) -> None:
        self.pending = None if state["pending"] is None else _Arrived(state["pending"])
        self.average = state["average"]


class StaleExchange:
    """The aggregation of one rank under a PipeGCN schedule (module docstring), on the rank's
    :class:`~supergcn.distributed.rank_operators.RankOperators`: ``forward`` and ``backward``
    as :class:`RankOperators`' own, so that it drives the same differentiable operator.

    Args:
        operators: the rank's operators and exchange counts.
        schedule: ``pipe``, ``pipe-f``, ``pipe-g`` or ``pipe-fg``.
        momentum: gamma of the moving average, where one is taken.

    Raises:
        ValueError: not one of PipeGCN's schedules.
    """

    def __init__(self, operators, schedule: str, momentum: float = 0.95) -> None:
        if schedule not in PIPELINED_SCHEDULES:
            raise ValueError(f"{schedule!r} is not one of PipeGCN's schedules {tuple(PIPELINED_SCHEDULES)}")
        self.operators = operators
        suffix = schedule.partition("-")[2]
        self._smooth = {"forward": "f" in suffix, "backward": "g" in suffix}
        self.momentum = momentum
        self.passes = 0  # training passes begun (one per epoch)
        self._slots: dict[tuple[str, int], _StaleRows] = {}

    def begin_pass(self) -> None:
        """Start a training pass (an epoch's forward)."""
        self.passes += 1

    def _slot(self, direction: str, layer: int) -> _StaleRows:
        key = (direction, layer)
        if key not in self._slots:
            self._slots[key] = _StaleRows(self._smooth[direction], self.momentum)
        return self._slots[key]

    def poll(self) -> None:
        """Let MPI move every exchange in flight along (MPICH progresses only inside MPI calls)."""
        for slot in self._slots.values():
            if slot.pending is not None:
                slot.pending.test()

    def _exchange(self, direction: str, layer: int, rows: torch.Tensor, local, product: dict) -> torch.Tensor:
        """Start sending ``rows``, run the ``local`` product meanwhile, and return it with the
        rows the previous pass's exchange of this layer and direction brought."""
        operators, timer = self.operators, self.operators.timer
        send_counts, recv_counts = operators.send_counts, operators.recv_counts
        if direction == "backward":
            send_counts, recv_counts = recv_counts, send_counts
        slot = self._slot(direction, layer)
        with timer.phase("communication"):
            stale = slot.take((int(recv_counts.sum()), rows.shape[1]))
            slot.pending = operators.communicator.ialltoallv(rows.numpy(), send_counts, recv_counts)
        with timer.phase("aggregation"):
            out = local.matmul(pieces=operators.pieces_beside(rows.shape[1]), between=self.poll, **product)
        return out, torch.from_numpy(stale)

    def forward(self, x: torch.Tensor, row_scale: torch.Tensor | None, layer: int) -> torch.Tensor:
        """Y_t of the ``layer``-th aggregation of the pass (module docstring)."""
        operators = self.operators
        with operators.timer.phase("aggregation"):
            send = operators.send.matmul(x)
        out, stale = self._exchange("forward", layer, send, operators.local, {"x": x})
        with operators.timer.phase("aggregation"):
            return operators.remote.matmul(stale, out=out, accumulate=True, row_scale=row_scale)

    def backward(self, grad: torch.Tensor, row_scale: torch.Tensor | None, layer: int) -> torch.Tensor:
        """dLoss/dX_t of the ``layer``-th aggregation (module docstring)."""
        operators = self.operators
        with operators.timer.phase("aggregation"):
            grad = grad.contiguous() if row_scale is None else grad * row_scale[:, None]
            grad_received = operators.remote.t_matmul(grad)
        grad_x, stale = self._exchange("backward", layer, grad_received, operators.local,
                                       {"x": grad, "transpose": True})
        with operators.timer.phase("aggregation"):
            return operators.send.t_matmul(stale, out=grad_x, accumulate=True)

    def state(self) -> dict:
        """What a checkpoint needs to continue exactly: the passes, the rows in flight
        (awaited here; every rank has started them, so waiting ends) and the averages."""
        return {"passes": self.passes, "slots": {key: slot.state() for key, slot in self._slots.items()}}

    def restore(self, state: dict) -> None:
        """Continue from :meth:`state`'s result."""
        self.passes = state["passes"]
        self._slots = {}
        for (direction, layer), slot_state in state["slots"].items():
            self._slot(direction, layer).restore(slot_state)

    def drain(self) -> None:
        """Wait for every exchange still in flight (before the communicator is closed)."""
        for slot in self._slots.values():
            if slot.pending is not None:
                slot.pending.wait()
                slot.pending = None
