"""SAR's sequential exchange on one rank (its maths: :mod:`supergcn.methods.sar`): each
aggregation fetches one peer's rows at a time, in a fixed ring order, forward and backward.
A sum of rows runs here; GAT's attention takes its own sequential form
(:mod:`supergcn.methods.sar.attention`), which this exchange gives the model in place of its
one-shot attention and whose messages it carries."""

from __future__ import annotations

import time

import numpy as np
import torch

from supergcn.distributed.operators import SparseOperator
from supergcn.distributed.protocol import RankMethod
from supergcn.methods.sar.attention import SequentialAttention
from supergcn.models.gat.layer import ATTENTION

#: The message tags of the two passes' steps (forward rows, backward gradients).
_FORWARD_TAG, _BACKWARD_TAG = 71, 72


class _Released:
    """What a released operator of the one-shot exchange is under SAR: any use is a bug."""

    def __getattr__(self, name):
        raise RuntimeError("the one-shot exchange's operators are released in a SAR run: every pass is SAR's")


def _offsets(counts: np.ndarray) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


class SequentialExchange(RankMethod):
    """The aggregation of one rank under ``--sar`` (:mod:`supergcn.methods.sar`), on the
    rank's :class:`~supergcn.distributed.rank_operators.RankOperators`: the exchange of its
    training and evaluation passes (:class:`~supergcn.distributed.protocol.Exchange`).

    Args:
        operators: the rank's operators and exchange counts.
        mode: ``sa`` or ``sar``.
        kernel: the sparse kernels of the per-peer operators (the run's).
        attends: whether the model's aggregation is attention (GAT: its softmax is taken one
            peer at a time, :mod:`supergcn.methods.sar.attention`).

    Raises:
        ValueError: not one of SAR's modes.
    """

    in_evaluation = True  # SAR's memory bound holds in inference too
    exact = True          # a linear map of its input: the one-shot aggregation, summed peer by peer
    owns_normalisation = False

    def __init__(self, operators, mode: str, kernel: str = "numba", attends: bool = False) -> None:
        from supergcn.methods.sar import SAR_MODES

        if mode not in SAR_MODES:
            raise ValueError(f"{mode!r} is not one of SAR's modes {tuple(SAR_MODES)}")
        self.operators = operators
        self.mode = mode
        communicator = operators.communicator
        self.rank, self.size = communicator.rank, communicator.size
        self.attends, self.refetches = attends, mode == "sar" and attends
        self.send_counts = np.asarray(operators.send_counts, dtype=np.int64)
        self.recv_counts = np.asarray(operators.recv_counts, dtype=np.int64)
        # where each peer's rows start in the one-shot exchange's send and receive order
        self.send_at, self.recv_at = _offsets(self.send_counts), _offsets(self.recv_counts)
        # S_j: the send rows of peer j; R_j: the columns of the rows peer j sends (its own CSR).
        # Attention reads neither (its own edges per peer, SequentialAttention's): not built for it.
        self._send, self._remote = ({}, {}) if attends else self._peer_operators(operators.plan, kernel)
        # Every pass of the run is this exchange's (in_evaluation): the one-shot exchange's whole
        # send and remote operators would only hold a second copy of what the per-peer ones hold
        # (on products at P = 2, 0.39 GiB of the largest rank's peak), so they are let go; a use fails loudly.
        operators.send = operators.remote = _Released()
        self.largest_peer_bytes = 0  # the most rows of one peer alive at once, in bytes
        self.at_once_bytes = 0       # what the one-shot exchange would hold: every peer's rows
        self.kept_bytes = 0          # peers' rows kept from a forward for its backward (GAT under sa)
        self.refetch_seconds = 0.0   # backward steps fetching a peer's rows again (GAT under sar)
        self.refetch_bytes = 0
        self._sending: list[np.ndarray] = []  # the rows of the step in flight, alive until its wait
        # GAT's softmax taken one peer at a time, in place of its one-shot attention
        self.rank_states = {ATTENTION: lambda ops: SequentialAttention(self)}

    def _peer_operators(self, plan, kernel: str) -> tuple[dict, dict]:
        """S_j and R_j of every peer j with rows (module docstring of :mod:`supergcn.methods.sar`)."""
        send_at, recv_at = self.send_at, self.recv_at
        matrices = plan.matrices()
        send, remote = matrices["send"].tocsr(), matrices["remote"].tocsc()
        return ({j: SparseOperator(send[send_at[j]:send_at[j + 1]], kernel)
                 for j in range(self.size) if self.send_counts[j]},
                {j: SparseOperator(remote[:, recv_at[j]:recv_at[j + 1]].tocsr(), kernel)
                 for j in range(self.size) if self.recv_counts[j]})

    @property
    def exchange(self) -> SequentialExchange:
        """The method is its exchange."""
        return self

    def begin_pass(self) -> None:
        """Nothing carries from one pass to the next."""

    def steps(self):
        """(k, the peer sent to, the peer received from) of steps k = 1 .. P-1: the ring order."""
        return [(k, (self.rank + k) % self.size, (self.rank - k) % self.size) for k in range(1, self.size)]

    def swap(self, rows: np.ndarray | None, to: int, count: int, source: int, width: int, tag: int,
             kind: str = "data"):
        """Start sending ``rows`` (float32) to ``to`` and receiving ``count`` rows of ``width``
        from ``source``; returns the requests and the receive buffer (None where nothing
        comes). The rows sent are held until :meth:`wait`; the communicator's byte counters
        count them under ``kind`` as every exchange's are."""
        communicator = self.operators.communicator
        comm = communicator.comm
        requests = []
        received = None
        with self.operators.timer.phase("communication"):
            if count:
                received = np.empty((count, width), dtype=np.float32)
                requests.append(comm.Irecv(received, source=source, tag=tag))
                communicator.bytes_received[kind][source] += received.nbytes
            if rows is not None:
                data = np.ascontiguousarray(rows, dtype=np.float32)
                self._sending.append(data)
                requests.append(comm.Isend(data, dest=to, tag=tag))
                communicator.bytes_sent[kind][to] += data.nbytes
        return requests, received

    def wait(self, requests) -> None:
        """Wait for a step's requests; the rows it sent are let go."""
        from mpi4py import MPI

        with self.operators.timer.phase("communication"):
            MPI.Request.Waitall(requests)
        self._sending.clear()

    def note(self, rows: int, total: int, width: int) -> None:
        """A peer's ``rows`` of ``width`` float32 values arrived, of ``total`` from all peers."""
        self.largest_peer_bytes = max(self.largest_peer_bytes, rows * width * 4)
        self.at_once_bytes = max(self.at_once_bytes, total * width * 4)

    def refetched(self, began: float, nbytes: int) -> None:
        """A backward step fetched a peer's rows again (``sar``): since ``began``, ``nbytes``."""
        self.refetch_seconds += time.perf_counter() - began
        self.refetch_bytes += nbytes

    def _summing(self) -> None:
        if self.attends:
            raise RuntimeError("an attention model aggregates through SAR's attention, not its sum of rows")

    def forward(self, x: torch.Tensor, row_scale: torch.Tensor | None, layer: int) -> torch.Tensor:
        """Y = D (L X + sum_k R_{r-k} B_{r-k}), one peer's rows at a time (module docstring)."""
        self._summing()
        operators, timer = self.operators, self.operators.timer
        x = x.contiguous()
        width = x.shape[1]
        out = None
        for _, to, source in self.steps():
            with timer.phase("aggregation"):
                rows = self._send[to].matmul(x) if to in self._send else None
            requests, received = self.swap(None if rows is None else rows.numpy(), to, int(self.recv_counts[source]),
                                           source, width, _FORWARD_TAG)
            if out is None:  # the local product while the first peer's rows travel
                with timer.phase("aggregation"):
                    out = operators.local.matmul(x)
            self.wait(requests)
            del rows
            if received is not None:
                self.note(len(received), int(self.recv_counts.sum()), width)
                with timer.phase("aggregation"):
                    self._remote[source].matmul(torch.from_numpy(received), out=out, accumulate=True)
            del received
        with timer.phase("aggregation"):
            if out is None:  # one rank: no peer
                out = operators.local.matmul(x)
            if row_scale is not None:
                out.mul_(row_scale[:, None])
        return out

    def backward(self, grad: torch.Tensor, row_scale: torch.Tensor | None, layer: int) -> torch.Tensor:
        """dLoss/dX = L^T D G + sum_k S_{r+k}^T H_{r+k}, one peer's gradients at a time
        (module docstring): step k sends R_{r-k}^T D G back to r - k and receives from r + k
        the gradient of the rows sent to it."""
        self._summing()
        operators, timer = self.operators, self.operators.timer
        with timer.phase("aggregation"):
            scaled = grad.contiguous() if row_scale is None else grad * row_scale[:, None]
        width = scaled.shape[1]
        out = None
        for _, to, source in self.steps():
            with timer.phase("aggregation"):
                back = self._remote[source].t_matmul(scaled) if source in self._remote else None
            requests, arrived = self.swap(None if back is None else back.numpy(), source, int(self.send_counts[to]),
                                          to, width, _BACKWARD_TAG)
            if out is None:
                with timer.phase("aggregation"):
                    out = operators.local.t_matmul(scaled)
            self.wait(requests)
            del back
            if arrived is not None:
                with timer.phase("aggregation"):
                    self._send[to].t_matmul(torch.from_numpy(arrived), out=out, accumulate=True)
            del arrived
        if out is None:
            with timer.phase("aggregation"):
                out = operators.local.t_matmul(scaled)
        return out

    def header(self) -> dict | None:
        """The run's header entry (collective: rank 0 gets it): the mode, the ring order,
        per rank the rows of its largest peer and of all peers (what it holds at once in
        the sequential and the one-shot exchange), and whether ``sar`` re-fetches anything
        (a linear aggregation's backward needs none of the fetched rows).

        Returns:
            The entry on rank 0, None elsewhere.
        """
        largest = int(self.recv_counts.max(initial=0))
        gathered = self.operators.communicator.comm.gather((largest, int(self.recv_counts.sum())), root=0)
        if self.rank != 0:
            return None
        return {"mode": self.mode, "order": "ring: step k sends to rank + k and receives from rank - k",
                "largest_peer_rows": [rows for rows, _ in gathered], "rows_at_once": [rows for _, rows in gathered],
                "refetches": self.refetches,
                "note": ("attention's backward needs every peer's rows and scores: sar fetches them again, sa keeps "
                         "them from the forward" if self.attends else
                         "a linear aggregation's backward needs no fetched row: sa and sar are the same computation")}

    def end_epoch(self) -> dict:
        """The epoch's ``sequential_aggregation`` entry (collective: rank 0 gets it): the
        largest bytes of one peer's rows any rank held at once in the epoch's passes, and
        what the one-shot exchange would have held (every peer's rows of the widest layer).

        Returns:
            ``{"sequential_aggregation": {...}}`` on rank 0, empty on the others.
        """
        from mpi4py import MPI

        mine = np.array([self.largest_peer_bytes, self.at_once_bytes, self.kept_bytes, self.refetch_bytes,
                         round(self.refetch_seconds * 1e9)], dtype=np.int64)
        most = np.zeros_like(mine)
        self.operators.communicator.comm.Reduce(mine, most, op=MPI.MAX, root=0)
        self.largest_peer_bytes = self.at_once_bytes = self.kept_bytes = self.refetch_bytes = 0
        self.refetch_seconds = 0.0
        if self.rank != 0:
            return {}
        return {"sequential_aggregation": {"largest_peer_bytes": int(most[0]), "at_once_bytes": int(most[1]),
                                           "kept_for_backward_bytes": int(most[2]), "refetch_bytes": int(most[3]),
                                           "refetch_seconds": float(most[4]) / 1e9}}


def build(context) -> SequentialExchange:
    """The rank's sequential exchange under ``context.config.sar``.

    Args:
        context: the rank's :class:`~supergcn.train.steps.RankContext`.

    Returns:
        The method's state on this rank.
    """
    from supergcn.models import card

    return SequentialExchange(context.operators, context.config.sar, context.config.kernel,
                              attends=not card(context.config.model).linear_aggregation)
