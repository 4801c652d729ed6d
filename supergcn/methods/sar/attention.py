"""GAT's attention under SAR (:mod:`supergcn.methods.sar`): the softmax over a node's
in-neighbours taken one peer at a time, as an online softmax, and its backward with each
peer's rows fetched again (``sar``) or kept from the forward (``sa``).

With GAT's notation (:mod:`supergcn.models.gat`: z = X W^T in H heads of C, source scores
a_u = a_src · z_u, destination scores d_v = a_dst · z_v, e_vu = LeakyReLU(d_v + a_u)), a
destination's state over a part of its sources is (m, s, r): their largest e, the sum of
exp(e - m) and the sum of exp(e - m) z_u. Rank r starts from its local sources and self
loops, and at each step k of the ring order (the exchange's: send to r + k, receive from
r - k) receives peer r - k's rows z_u and scores a_u and merges its sources' part into the
state of the destinations they reach:

    m' = max(m, max_u e_vu),   s' = exp(m - m') s + sum_u exp(e_vu - m'),
    r' = exp(m - m') r + sum_u exp(e_vu - m') z_u,

then frees them; out_v = r / s after the last peer, the softmax PyG's ``GATConv`` takes
(:mod:`supergcn.kernels.attention`'s kernels, the piece being the running state). The
maxima cancel, so the result is the one-shot exchange's to rounding.

Backward needs only the final (m, s, out) per destination: with G = dLoss/dout,
g_v = <G_v, out_v> and alpha_vu = exp(e_vu - m_v) / s_v, each edge's gradient is

    dLoss/dz_u += alpha_vu G_v,   dLoss/de_vu = alpha_vu (<G_v, z_u> - g_v),

summed into d_v (by destination) and a_u (by source) through LeakyReLU's slope. So each
peer's share is computed alone, in the same order: under ``sar`` step k fetches peer
r - k's rows and scores again (SAR's rematerialization: nothing of a peer lives between
the passes), under ``sa`` they were kept by the forward (SA: the autograd graph keeps what
the backward needs); the gradients of its rows and scores go back to it, and those of the
rows this rank sent to r + k come back and are added to z's and a's.

Plans: the post plan only. A hybrid plan's PRE rows of attention are partial softmax
states over the sender's sources, weighted by the owner's destination scores: a sequential
schedule would add a third message per step (the scores, owner to sender) and, under
``sar``, a second recomputation on the sender; SAR fetches the raw rows of the remote
sources (the post plan's halo), so that is what it takes, and its card refuses the rest.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from supergcn.kernels.attention import (
    AttentionCsr,
    attention_backward_rows,
    attention_backward_sources,
    attention_forward,
    head_dots,
)
from supergcn.models.gat.online_softmax import ATTENTION_KIND
from supergcn.models.gat.routes import AttentionRoutes

#: The message tags of the rows and of the scores (forward, and the refetches of ``sar``).
_ROWS_TAG, _SCORES_TAG = 73, 74
#: The tags of their gradients (backward).
_GRAD_ROWS_TAG, _GRAD_SCORES_TAG = 75, 76

#: The piece order of a kernel call without pieces.
_NO_ORDER = np.empty(0, dtype=np.int64)


@dataclass
class _Peer:
    """One peer's edges on this rank: the destinations its rows reach (``rows``, in order)
    and the edges from its received rows to them (``csr``, over those destinations)."""

    rows: torch.Tensor
    csr: AttentionCsr
    one_piece_each: np.ndarray


def _peer(destination: np.ndarray, source: np.ndarray, count: int) -> _Peer:
    rows = np.unique(destination)
    compact = np.searchsorted(rows, destination)
    csr = AttentionCsr(compact, source, len(rows), count)
    return _Peer(rows=torch.from_numpy(rows.astype(np.int64)), csr=csr,
                 one_piece_each=np.arange(len(rows) + 1, dtype=np.int64))


class SequentialAttention:
    """GAT's aggregation of one rank under SAR (module docstring), built once per rank in
    place of GAT's :class:`~supergcn.models.gat.online_softmax.DistributedAttention` and
    called as it is.

    Args:
        exchange: the rank's :class:`~supergcn.methods.sar.exchange.SequentialExchange`
            (its ring order, messages and counters).

    Raises:
        ValueError: a plan with PRE rows (module docstring), on every rank.
    """

    def __init__(self, exchange) -> None:
        operators = exchange.operators
        plan = operators.plan
        has_pre = operators.communicator.comm.allreduce(int(plan.send_pre_counts.sum()))
        if has_pre:
            raise ValueError("SAR's attention takes the post plan's raw rows, not a plan with PRE rows — use "
                             "--strategy post")
        self.exchange = exchange
        routes = AttentionRoutes.of(plan, np.zeros(exchange.size, dtype=np.int64))
        n = plan.num_owned
        destination, source = routes.direct_destination.numpy(), routes.direct_source.numpy()
        local = source < n
        self.local = AttentionCsr(destination[local], source[local], n, n)
        recv_at, remote_row = exchange.recv_at, source - n
        self.peers = {}
        for j in np.flatnonzero(exchange.recv_counts):
            mine = (remote_row >= recv_at[j]) & (remote_row < recv_at[j + 1])
            self.peers[int(j)] = _peer(destination[mine], remote_row[mine] - recv_at[j],
                                       int(exchange.recv_counts[j]))
        sent, send_at = routes.post_sources[routes.send_order], exchange.send_at
        self.sent = {int(j): sent[send_at[j]:send_at[j + 1]] for j in np.flatnonzero(exchange.send_counts)}

    def __call__(self, z: torch.Tensor, source_score: torch.Tensor, destination_score: torch.Tensor,
                 layer: int, negative_slope: float = 0.2, dropout: float = 0.0, training: bool = False) -> torch.Tensor:
        """GAT's ``out_v`` for every owned v (module docstring), as
        :class:`~supergcn.models.gat.online_softmax.DistributedAttention` gives it.

        Args:
            z: n x H x C projected rows.
            source_score: n x H.
            destination_score: n x H.
            layer: the aggregation's place in the pass.
            negative_slope: LeakyReLU's slope.
            dropout: attention dropout: SAR's card refuses any (nothing draws it here).
            training: whether this is a training pass.

        Returns:
            n x H x C aggregated rows.
        """
        if training and dropout > 0:
            raise ValueError("SAR's attention draws no attention dropout — use --attention-dropout 0")
        return _SequentialSoftmax.apply(z, source_score, destination_score, self, negative_slope)

    def _rows_out(self, z: np.ndarray, scores: np.ndarray, to: int, source: int):
        """One step's rows and scores: this rank's for ``to`` go, ``source``'s come; returns
        the requests and what will have come (None where nothing does)."""
        exchange = self.exchange
        heads, values = scores.shape[1], z.shape[1] * z.shape[2]
        index = self.sent.get(to)
        rows = None if index is None else z.reshape(len(z), values)[index.numpy()]
        row_scores = None if index is None else scores[index.numpy()]
        count = int(exchange.recv_counts[source])
        requests, got_rows = exchange.swap(rows, to, count, source, values, _ROWS_TAG)
        more, got_scores = exchange.swap(row_scores, to, count, source, heads, _SCORES_TAG, kind=ATTENTION_KIND)
        return requests + more, got_rows, got_scores

    def _gradients_back(self, rows: np.ndarray | None, scores: np.ndarray | None, heads: int, values: int, to: int,
                        source: int):
        """One step's gradients: those of ``source``'s rows and scores go back to it, those of
        the rows this rank sent ``to`` come; returns the requests and what will have come."""
        exchange = self.exchange
        count = int(exchange.send_counts[to])
        requests, got_rows = exchange.swap(rows, source, count, to, values, _GRAD_ROWS_TAG)
        more, got_scores = exchange.swap(scores, source, count, to, heads, _GRAD_SCORES_TAG, kind=ATTENTION_KIND)
        return requests + more, got_rows, got_scores

    def forward(self, z: torch.Tensor, source_score: torch.Tensor, destination_score: torch.Tensor, slope: float,
                keep: bool):
        """The online softmax over the local sources and then each peer's (module docstring).

        Returns:
            ``(out, maxima, sums, kept)``: n x H x C, n x H, n x H, and each peer's rows and
            scores where ``keep`` (``sa`` while training), else an empty dict.
        """
        exchange, timer = self.exchange, self.exchange.operators.timer
        heads, width = z.shape[1:]
        zs, scores, destinations = z.numpy(), source_score.numpy(), destination_score.numpy()
        n = len(z)
        numerator, maxima, sums = z.new_empty((n, heads, width)), z.new_empty((n, heads)), z.new_empty((n, heads))
        empty_rows, empty_scalars = np.empty((0, heads, width), np.float32), np.empty((0, heads), np.float32)

        def local_state():  # the local sources and self loops: the state every peer's part merges into
            with timer.phase("aggregation"):
                attention_forward(self.local.indptr, self.local.indices, zs, scores, destinations,
                                  np.zeros(n + 1, dtype=np.int64), _NO_ORDER, empty_rows, empty_scalars,
                                  empty_scalars, slope, False, numerator.numpy(), maxima.numpy(), sums.numpy())
        kept, started = {}, False
        for _, to, source in exchange.steps():
            requests, got_rows, got_scores = self._rows_out(zs, scores, to, source)
            if not started:  # while the first peer's rows travel
                local_state()
                started = True
            exchange.wait(requests)
            if got_rows is None:
                continue
            exchange.note(len(got_rows), int(exchange.recv_counts.sum()), heads * width + heads)
            peer = self.peers[source]
            received = got_rows.reshape(-1, heads, width)
            with timer.phase("aggregation"):
                self._merge(peer, received, got_scores, destination_score, numerator, maxima, sums, slope)
            if keep:
                kept[source] = (received, got_scores)
            del got_rows, got_scores, received
        if not started:  # one rank: no peer
            local_state()
        with timer.phase("aggregation"):
            out = numerator.div_(sums[..., None])  # every node's self loop makes its sum at least 1
        exchange.kept_bytes = max(exchange.kept_bytes,
                                  sum(rows.nbytes + values.nbytes for rows, values in kept.values()))
        return out, maxima, sums, kept

    @staticmethod
    def _merge(peer: _Peer, received, got_scores, destination_score, numerator, maxima, sums, slope: float) -> None:
        """The state of the destinations ``peer``'s rows reach, updated with its edges (the
        running state is the one piece of each)."""
        rows = peer.rows
        csr = peer.csr
        new = numerator.new_empty((len(rows), *numerator.shape[1:]))
        new_maxima, new_sums = maxima.new_empty((len(rows), maxima.shape[1])), sums.new_empty((len(rows),
                                                                                                   sums.shape[1]))
        attention_forward(csr.indptr, csr.indices, received, got_scores, destination_score[rows].numpy(),
                          peer.one_piece_each, peer.one_piece_each[:-1], numerator[rows].numpy(),
                          sums[rows].numpy(), maxima[rows].numpy(), slope, False, new.numpy(), new_maxima.numpy(),
                          new_sums.numpy())
        numerator[rows], maxima[rows], sums[rows] = new, new_maxima, new_sums

    def backward(self, grad: torch.Tensor, saved, kept: dict, slope: float):
        """The gradients of z, the source and the destination scores (module docstring),
        one peer at a time in the ring order.

        Returns:
            ``(dLoss/dz, dLoss/da, dLoss/dd)``.
        """
        exchange, timer = self.exchange, self.exchange.operators.timer
        z, source_score, destination_score, out, maxima, sums = saved
        heads, width = z.shape[1:]
        zs, scores = z.numpy(), source_score.numpy()
        grad = grad.contiguous()
        with timer.phase("aggregation"):
            projected = sums.new_empty(sums.shape)
            head_dots(grad.numpy(), out.numpy(), projected.numpy())
            grad_z, grad_source = torch.empty_like(z), torch.empty_like(source_score)
            grad_destination = torch.empty_like(destination_score)
            self._edges(self.local, zs, scores, destination_score, maxima, sums, grad, projected,
                        grad_destination.numpy(), grad_z.numpy(), grad_source.numpy(), slope)
        for _, to, source in exchange.steps():
            if exchange.mode == "sa":
                received, got_scores = kept.pop(source, (None, None))
            else:  # sar: the peer's rows fetched again (and this rank's sent again to `to`)
                began = time.perf_counter()
                requests, got_rows, got_scores = self._rows_out(zs, scores, to, source)
                exchange.wait(requests)
                received = None if got_rows is None else got_rows.reshape(-1, heads, width)
                exchange.refetched(began, 0 if got_rows is None else got_rows.nbytes + got_scores.nbytes)
            back_rows = back_scores = None
            if received is not None:
                peer = self.peers[source]
                rows = peer.rows
                with timer.phase("aggregation"):
                    part = torch.empty((len(rows), heads))
                    back_rows = np.empty((peer.csr.num_sources, heads, width), np.float32)
                    back_scores = np.empty((peer.csr.num_sources, heads), np.float32)
                    self._edges(peer.csr, received, got_scores, destination_score[rows], maxima[rows], sums[rows],
                                grad[rows], projected[rows], part.numpy(), back_rows, back_scores, slope)
                    grad_destination.index_add_(0, rows, part)
                del received, got_scores
                back_rows = back_rows.reshape(len(back_rows), heads * width)
            requests, came_rows, came_scores = self._gradients_back(back_rows, back_scores, heads, heads * width,
                                                                    to, source)
            exchange.wait(requests)
            del back_rows, back_scores
            if came_rows is not None:
                index = self.sent[to]
                with timer.phase("aggregation"):
                    grad_z.view(len(z), -1).index_add_(0, index, torch.from_numpy(came_rows))
                    grad_source.index_add_(0, index, torch.from_numpy(came_scores))
        return grad_z, grad_source, grad_destination

    @staticmethod
    def _edges(csr: AttentionCsr, values, scores, destination_score, maxima, sums, grad, projected,
               grad_destination, grad_values, grad_scores, slope: float) -> None:
        """The gradients of the edges of ``csr`` (rows: destinations; sources: ``values``),
        given the final state: ``grad_destination`` per row, ``grad_values`` and
        ``grad_scores`` per source (written, not added)."""
        heads = values.shape[1]
        entry_weight = np.empty((csr.num_entries, heads), np.float32)
        entry_grad = np.empty((csr.num_entries, heads), np.float32)
        no_pieces = np.zeros(csr.num_rows + 1, dtype=np.int64)
        attention_backward_rows(csr.indptr, csr.indices, np.asarray(values), np.asarray(scores),
                                destination_score.contiguous().numpy(), maxima.contiguous().numpy(),
                                sums.contiguous().numpy(), grad.contiguous().numpy(), projected.contiguous().numpy(),
                                no_pieces, _NO_ORDER, np.empty((0, heads), np.float32), slope, entry_weight,
                                entry_grad, grad_destination, np.empty((0, *values.shape[1:]), np.float32),
                                np.empty((0, heads), np.float32))
        attention_backward_sources(csr.transpose_indptr, csr.transpose_entries, csr.transpose_rows, entry_weight,
                                   entry_grad, grad.contiguous().numpy(), grad_values, grad_scores)


class _SequentialSoftmax(torch.autograd.Function):
    """:class:`SequentialAttention`'s forward and backward as one differentiable operator."""

    @staticmethod
    def forward(ctx, z, source_score, destination_score, attention: SequentialAttention, slope: float):
        z, source_score, destination_score = (x.detach().contiguous() for x in (z, source_score, destination_score))
        keep = attention.exchange.mode == "sa" and any(ctx.needs_input_grad[:3])
        out, maxima, sums, kept = attention.forward(z, source_score, destination_score, slope, keep)
        ctx.save_for_backward(z, source_score, destination_score, out, maxima, sums)
        ctx.attention, ctx.kept, ctx.slope = attention, kept, slope
        return out

    @staticmethod
    def backward(ctx, grad):
        grads = ctx.attention.backward(grad, ctx.saved_tensors, ctx.kept, ctx.slope)
        ctx.kept = {}
        return (*grads, None, None)
