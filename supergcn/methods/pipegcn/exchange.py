"""PipeGCN's stale exchange on one rank (its maths: :mod:`supergcn.methods.pipegcn`): each
training pass sends its rows and gradients and uses those the previous pass sent."""

from __future__ import annotations

import numpy as np
import torch

from supergcn.distributed.comm import Arrived
from supergcn.distributed.protocol import RankMethod
from supergcn.distributed.rank_operators import InFlight
from supergcn.methods.pipegcn import PIPELINED_SCHEDULES


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
        self.pending = None if pending is None else Arrived(pending)
        return {"pending": pending, "average": self.average}

    def restore(self, state: dict) -> None:
        self.pending = None if state["pending"] is None else Arrived(state["pending"])
        self.average = state["average"]


class StaleExchange(RankMethod):
    """The aggregation of one rank under a PipeGCN schedule (:mod:`supergcn.methods.pipegcn`),
    on the rank's :class:`~supergcn.distributed.rank_operators.RankOperators`: the exchange
    of its training passes (:class:`~supergcn.distributed.protocol.Exchange`).

    Args:
        operators: the rank's operators and exchange counts.
        schedule: ``pipe``, ``pipe-f``, ``pipe-g`` or ``pipe-fg``.
        momentum: gamma of the moving average, where one is taken.

    Raises:
        ValueError: not one of PipeGCN's schedules.
    """

    in_evaluation = False  # PipeGCN evaluates on the full graph: the exact exchange
    exact = False
    owns_normalisation = False

    def __init__(self, operators, schedule: str, momentum: float = 0.95) -> None:
        if schedule not in PIPELINED_SCHEDULES:
            raise ValueError(f"{schedule!r} is not one of PipeGCN's schedules {tuple(PIPELINED_SCHEDULES)}")
        self.operators = operators
        suffix = schedule.partition("-")[2]
        self._smooth = {"forward": "f" in suffix, "backward": "g" in suffix}
        self.momentum = momentum
        self.passes = 0  # training passes begun (one per epoch)
        self._slots: dict[tuple[str, int], _StaleRows] = {}

    @property
    def exchange(self) -> StaleExchange:
        """The method is its exchange."""
        return self

    def begin_pass(self) -> None:
        """Start a training pass (an epoch's forward)."""
        self.passes += 1

    def _slot(self, direction: str, layer: int) -> _StaleRows:
        key = (direction, layer)
        if key not in self._slots:
            self._slots[key] = _StaleRows(self._smooth[direction], self.momentum)
        return self._slots[key]

    def _start(self, direction: str, layer: int, rows: torch.Tensor) -> InFlight:
        """Start sending ``rows``; the flight's rows are those the previous pass's exchange of
        this layer and direction brought, and its polls move every exchange in flight along
        (MPICH progresses only inside MPI calls)."""
        operators = self.operators
        send_counts, recv_counts = operators.send_counts, operators.recv_counts
        if direction == "backward":
            send_counts, recv_counts = recv_counts, send_counts
        slot = self._slot(direction, layer)
        with operators.timer.phase("communication"):
            stale = torch.from_numpy(slot.take((int(recv_counts.sum()), rows.shape[1])))
            slot.pending = operators.communicator.ialltoallv(rows.numpy(), send_counts, recv_counts)
        return InFlight([other.pending for other in self._slots.values() if other.pending is not None],
                        lambda: stale)

    def forward(self, x: torch.Tensor, row_scale: torch.Tensor | None, layer: int) -> torch.Tensor:
        """Y_t of the ``layer``-th aggregation of the pass (:mod:`supergcn.methods.pipegcn`)."""
        operators = self.operators
        return operators.through(x, lambda rows: self._start("forward", layer, rows), operators.send,
                                 operators.remote, row_scale)

    def backward(self, grad: torch.Tensor, row_scale: torch.Tensor | None, layer: int) -> torch.Tensor:
        """dLoss/dX_t of the ``layer``-th aggregation (:mod:`supergcn.methods.pipegcn`)."""
        operators = self.operators
        return operators.through_transposed(grad, lambda rows: self._start("backward", layer, rows), operators.send,
                                            operators.remote, row_scale)

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

    def close(self) -> None:
        """Wait for every exchange still in flight (before the communicator is closed)."""
        for slot in self._slots.values():
            if slot.pending is not None:
                slot.pending.wait()
                slot.pending = None


def build(context) -> StaleExchange:
    """The rank's stale exchange under ``context.config.schedule``.

    Args:
        context: the rank's :class:`~supergcn.train.steps.RankContext`.

    Returns:
        The method's state on this rank.
    """
    return StaleExchange(context.operators, context.config.schedule, context.config.pipe_momentum)
