"""Graph attention (GAT) across ranks through the pre/post/hybrid exchange, exact.

PyG's ``GATConv`` for destination v, head h, with z = x W^T split into H heads of C and
the attention set N'(v) = (N(v) without v) plus v itself (PyG's self loops):

    e_vu = LeakyReLU(a_dst · z_v + a_src · z_u),   alpha_vu = exp(e_vu) / sum_{w in N'(v)} exp(e_vw),
    out_v = sum_{u in N'(v)} alpha_vu z_u.

A mean or a GCN weight does not depend on the destination, so a sender can sum a
destination's sources before the exchange (PRE). Attention's weight does, and its
normaliser spans sources on several ranks. The softmax is still exact across ranks as an
*online softmax*: any part P of N'(v) is summarised by its state

    m = max_{u in P} e_vu,   s = sum_{u in P} exp(e_vu - m),   r = sum_{u in P} exp(e_vu - m) z_u,

and the parts merge by rescaling to the largest maximum M: out_v = sum_p exp(m_p - M) r_p
/ sum_p exp(m_p - M) s_p. Since the result does not depend on the maxima (they cancel),
they carry no gradient.

One layer's exchanges (:class:`DistributedAttention`), forward:

1. **Destination scores**, against the usual direction and for PRE rows only: each owner
   sends a_dst · z_v (H float32) for every PRE row it receives, to the row's sender.
2. **Rows** (the layer's exchange: quantized while training, as SAGE's rows are): a PRE row
   carries r (H·C values), a POST row z_u.
3. **Scalars**, float32: a PRE row's s and m (2H), a POST row's source score a_src · z_u (H).

The owner merges its local sources, its self loop and the POST rows edge by edge with the
PRE rows' states. Backward is autograd's, through the transposes of the three exchanges
(the rows' gradients quantized as SAGE's are; the maxima's entries of the scalars' gradient
are zero). A PRE row thus costs H·C + 3H numbers against a POST row's H·C + H, which is what
the weighted cover of the plan prices (:func:`supergcn.plan.costs.row_costs`).

The edge-level steps run on the numba kernels of :mod:`supergcn.kernels.attention` (no
E x H x C tensor), or, with ``kernel="torch"`` and wherever attention dropout draws, as
torch operations (E x H x C intermediates, like PyG's), the reference path. The exchanges
are synchronous: unlike SAGE's, they are not overlapped with the local work.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from supergcn.data.ranges import block_starts, concatenated_ranges
from supergcn.distributed.comm import MESSAGE_KINDS
from supergcn.distributed.exchange import RankOperators
from supergcn.kernels.attention import (
    AttentionCsr,
    attention_backward_rows,
    attention_backward_sources,
    attention_forward,
)
from supergcn.plan.rank_plan import RankPlan

#: The kind of message the attention scalars are counted under (:data:`~supergcn.distributed.comm.MESSAGE_KINDS`).
ATTENTION_KIND = MESSAGE_KINDS[2]


def _long(values: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(values, dtype=np.int64))


def flat_positions(pre_counts: np.ndarray, post_counts: np.ndarray, heads: int) -> tuple[np.ndarray, np.ndarray]:
    """Where each scalar lies in a flat buffer of per-rank blocks, each block holding its
    PRE rows (2H values each: s, then m) and then its POST rows (H values each).

    Args:
        pre_counts: PRE rows per rank.
        post_counts: POST rows per rank.
        heads: H.

    Returns:
        ``(pre, post)``: the positions of the PRE rows' values (rows x 2H) and of the POST
        rows' (rows x H), rows in rank order.
    """
    block_start = block_starts(2 * heads * pre_counts + heads * post_counts)
    pre_rank = np.repeat(np.arange(len(pre_counts)), pre_counts)
    post_rank = np.repeat(np.arange(len(post_counts)), post_counts)
    pre_row = block_start[pre_rank] + 2 * heads * (np.arange(len(pre_rank)) - block_starts(pre_counts)[pre_rank])
    post_row = (block_start[post_rank] + 2 * heads * pre_counts[post_rank]
                + heads * (np.arange(len(post_rank)) - block_starts(post_counts)[post_rank]))
    return (pre_row[:, None] + np.arange(2 * heads), post_row[:, None] + np.arange(heads))


@dataclass
class AttentionRoutes:
    """Index arrays of one rank's attention exchange, derived from its plan (see the
    module docstring). Sender side: the PRE rows' edges (row, owned source), the POST
    sources, and the send-buffer order. Receiver side: the PRE rows' buffer rows and
    destinations, the POST rows' buffer rows, and the *direct* edges (local sources
    without self loops, one self loop per node, POST rows), whose sources index the
    owned rows followed by the POST rows received.

    Args: the fields, as :meth:`of` derives them.
    """

    send_pre_counts: np.ndarray
    send_post_counts: np.ndarray
    recv_pre_counts: np.ndarray
    recv_post_counts: np.ndarray
    pre_edge_row: torch.Tensor
    pre_edge_source: torch.Tensor
    post_sources: torch.Tensor
    send_order: torch.Tensor
    pre_buffer_rows: torch.Tensor
    pre_destination: torch.Tensor
    post_buffer_rows: torch.Tensor
    direct_destination: torch.Tensor
    direct_source: torch.Tensor

    @classmethod
    def of(cls, plan: RankPlan, recv_pre_counts: np.ndarray) -> "AttentionRoutes":
        """The routes of ``plan``, given the PRE rows each rank sends this one.

        Args:
            plan: the rank's plan.
            recv_pre_counts: PRE rows received from each rank (the senders' ``send_pre_counts``).

        Returns:
            The rank's routes.
        """
        n = plan.num_owned
        recv_post_counts = plan.recv_counts - recv_pre_counts
        recv_start = block_starts(plan.recv_counts)
        pre_rows = concatenated_ranges(recv_start, recv_pre_counts)
        post_rows = concatenated_ranges(recv_start + recv_pre_counts, recv_post_counts)
        index_among = np.full(int(plan.recv_counts.sum()), -1, dtype=np.int64)
        index_among[pre_rows] = np.arange(len(pre_rows))
        index_among[post_rows] = np.arange(len(post_rows))
        is_pre = np.zeros(len(index_among), dtype=bool)
        is_pre[pre_rows] = True
        remote_destination = np.repeat(np.arange(n), np.diff(plan.remote_indptr))
        remote_pre = is_pre[plan.remote_indices]
        pre_destination = np.empty(len(pre_rows), dtype=np.int64)
        pre_destination[index_among[plan.remote_indices[remote_pre]]] = remote_destination[remote_pre]
        local_destination = np.repeat(np.arange(n), np.diff(plan.local_indptr))
        not_loop = plan.local_indices != local_destination
        direct_destination = np.concatenate([local_destination[not_loop], np.arange(n),
                                             remote_destination[~remote_pre]])
        direct_source = np.concatenate([plan.local_indices[not_loop], np.arange(n),
                                        n + index_among[plan.remote_indices[~remote_pre]]])
        pre_positions, post_positions = plan.send_positions()
        return cls(send_pre_counts=plan.send_pre_counts, send_post_counts=plan.send_post_counts,
                   recv_pre_counts=recv_pre_counts, recv_post_counts=recv_post_counts,
                   pre_edge_row=_long(np.repeat(np.arange(len(plan.pre_indptr) - 1), np.diff(plan.pre_indptr))),
                   pre_edge_source=_long(plan.pre_indices), post_sources=_long(plan.post_send_index),
                   send_order=_long(np.argsort(np.concatenate([pre_positions, post_positions]))),
                   pre_buffer_rows=_long(pre_rows), pre_destination=_long(pre_destination),
                   post_buffer_rows=_long(post_rows), direct_destination=_long(direct_destination),
                   direct_source=_long(direct_source))

    @property
    def num_pre_rows(self) -> int:
        """PRE rows this rank sends."""
        return int(self.send_pre_counts.sum())

    def scalar_layout(self, heads: int) -> dict[str, torch.Tensor | np.ndarray]:
        """The flat scalar buffers of ``heads`` heads (:func:`flat_positions`): the order
        that assembles the sent one, the positions that read the received one, and the
        counts of each."""
        sent_pre, sent_post = flat_positions(self.send_pre_counts, self.send_post_counts, heads)
        got_pre, got_post = flat_positions(self.recv_pre_counts, self.recv_post_counts, heads)
        return {"send_order": _long(np.argsort(np.concatenate([sent_pre.ravel(), sent_post.ravel()]))),
                "send_counts": 2 * heads * self.send_pre_counts + heads * self.send_post_counts,
                "recv_counts": 2 * heads * self.recv_pre_counts + heads * self.recv_post_counts,
                "recv_pre": _long(got_pre), "recv_post": _long(got_post)}


class _Exchanged(torch.autograd.Function):
    """Rows through an exchange; backward sends their gradient through its transpose."""

    @staticmethod
    def forward(ctx, rows, forward, backward):
        ctx.transpose = backward
        return forward(rows.detach().contiguous())

    @staticmethod
    def backward(ctx, grad):
        return ctx.transpose(grad.contiguous()), None, None


def segment_max(values: torch.Tensor, segment: torch.Tensor, num_segments: int) -> torch.Tensor:
    """The maximum of ``values`` (rows, detached) over each segment (rows with the same
    ``segment``); segments without rows get -inf.

    Args:
        values: E x H values.
        segment: E segment ids in 0..num_segments-1.
        num_segments: the segments.

    Returns:
        num_segments x H maxima.
    """
    out = values.new_full((num_segments, values.shape[1]), -torch.inf)
    return out.scatter_reduce_(0, segment[:, None].expand_as(values), values.detach(), "amax")


class _FusedAttention(torch.autograd.Function):
    """The numba kernels (:mod:`supergcn.kernels.attention`) as one differentiable gather:
    ``(out, maxima, sums)`` of the rows of ``csr`` from the table ``z`` and the pieces."""

    @staticmethod
    def forward(ctx, z, source_score, destination_score, piece_rows, piece_sums, piece_maxima, csr: AttentionCsr,
                slope: float, normalise: bool):
        z, source_score, destination_score, piece_rows, piece_sums, piece_maxima = (
            x.detach().contiguous() for x in (z, source_score, destination_score, piece_rows, piece_sums,
                                              piece_maxima))
        heads, width = z.shape[1:]
        out = z.new_empty((csr.num_rows, heads, width))
        maxima, sums = z.new_empty((csr.num_rows, heads)), z.new_empty((csr.num_rows, heads))
        attention_forward(csr.indptr, csr.indices, z.numpy(), source_score.numpy(), destination_score.numpy(),
                          csr.piece_indptr, csr.piece_order, piece_rows.numpy(), piece_sums.numpy(),
                          piece_maxima.numpy(), slope, normalise, out.numpy(), maxima.numpy(), sums.numpy())
        ctx.save_for_backward(z, source_score, destination_score, piece_maxima, out, maxima, sums)
        ctx.csr, ctx.slope, ctx.normalise = csr, slope, normalise
        ctx.mark_non_differentiable(maxima)
        return out, maxima, sums

    @staticmethod
    def backward(ctx, grad_out, _grad_maxima, grad_sums):
        z, source_score, destination_score, piece_maxima, out, maxima, sums = ctx.saved_tensors
        csr = ctx.csr
        grad_out = grad_out.contiguous()
        if ctx.normalise:
            projected = (grad_out * out).sum(-1)
        else:  # an unnormalised row's sum is an output of its own: S stands at 1, g at -dL/dS
            projected, sums = -grad_sums, torch.ones_like(sums)
        heads = z.shape[1]
        entry_weight = z.new_empty((csr.num_entries, heads))
        entry_grad = z.new_empty((csr.num_entries, heads))
        grad_destination = torch.empty_like(destination_score)
        grad_piece_rows = z.new_empty((len(piece_maxima), *z.shape[1:]))
        grad_piece_sums = torch.empty_like(piece_maxima)
        attention_backward_rows(csr.indptr, csr.indices, z.numpy(), source_score.numpy(), destination_score.numpy(),
                                maxima.numpy(), sums.contiguous().numpy(), grad_out.numpy(),
                                projected.contiguous().numpy(), csr.piece_indptr, csr.piece_order,
                                piece_maxima.numpy(), ctx.slope, entry_weight.numpy(), entry_grad.numpy(),
                                grad_destination.numpy(), grad_piece_rows.numpy(), grad_piece_sums.numpy())
        grad_z, grad_source_score = torch.empty_like(z), torch.empty_like(source_score)
        attention_backward_sources(csr.transpose_indptr, csr.transpose_entries, csr.transpose_rows,
                                   entry_weight.numpy(), entry_grad.numpy(), grad_out.numpy(), grad_z.numpy(),
                                   grad_source_score.numpy())
        return grad_z, grad_source_score, grad_destination, grad_piece_rows, grad_piece_sums, None, None, None, None


class DistributedAttention:
    """GAT's aggregation on one rank (module docstring), exchanging through ``operators``.

    Construction is collective: every rank tells every other how many PRE rows it sends it.

    Args:
        operators: the rank's operators (its plan, communicator, timer and exchange settings).
    """

    def __init__(self, operators: RankOperators) -> None:
        self.operators = operators
        counts = np.array(operators.communicator.comm.alltoall([int(c) for c in operators.plan.send_pre_counts]),
                          dtype=np.int64)
        self.routes = routes = AttentionRoutes.of(operators.plan, counts)
        self._layouts: dict[int, dict] = {}
        # The numba kernels, or torch's operations (the reference; also for attention dropout).
        self.fused = operators.local.kernel == "numba"
        if self.fused:
            n = operators.plan.num_owned
            self.sender_csr = AttentionCsr(routes.pre_edge_row.numpy(), routes.pre_edge_source.numpy(),
                                           routes.num_pre_rows, n)
            self.owner_csr = AttentionCsr(routes.direct_destination.numpy(), routes.direct_source.numpy(), n,
                                          n + len(routes.post_buffer_rows), routes.pre_destination.numpy())

    def _float32(self, rows: torch.Tensor, send_counts: np.ndarray, recv_counts: np.ndarray) -> torch.Tensor:
        operators = self.operators

        def there(values, send, receive):  # rows of a 2-D tensor
            with operators.timer.phase("communication"):
                received = operators.communicator.ialltoallv(values.numpy(), send, receive, kind=ATTENTION_KIND)
                return torch.from_numpy(received.wait())
        return _Exchanged.apply(rows, lambda x: there(x, send_counts, recv_counts),
                                lambda g: there(g, recv_counts, send_counts))

    def _rows(self, rows: torch.Tensor, layer: int) -> torch.Tensor:
        operators = self.operators
        return _Exchanged.apply(rows, lambda x: operators.start_exchange(x, layer=layer).finish().clone(),
                                lambda g: operators.start_exchange(g, reverse=True, layer=layer).finish().clone())

    def __call__(self, z: torch.Tensor, source_score: torch.Tensor, destination_score: torch.Tensor,
                 layer: int, negative_slope: float = 0.2, dropout: float = 0.0, training: bool = False) -> torch.Tensor:
        """``out_v`` of the module docstring for every owned v.

        Args:
            z: n x H x C projected rows.
            source_score: n x H, a_src · z.
            destination_score: n x H, a_dst · z.
            layer: the aggregation's place in the pass (the key of adaptive bit widths).
            negative_slope: LeakyReLU's slope.
            dropout: dropout on the attention coefficients (PyG's), while ``training``.
            training: whether this is a training pass.

        Returns:
            n x H x C aggregated rows.
        """
        routes, timed = self.routes, self.operators.timer.timed
        heads, width = z.shape[1:]
        layout = self._layouts.get(heads) or self._layouts.setdefault(heads, routes.scalar_layout(heads))
        to_senders = timed("aggregation", torch.index_select, destination_score, 0, routes.pre_destination)
        pre_destination_score = self._float32(to_senders, routes.recv_pre_counts, routes.send_pre_counts)
        fused = self.fused and not (training and dropout > 0)
        if fused:
            pre_state, sent = timed("aggregation", self._fused_partial_states, z, source_score,
                                    pre_destination_score, negative_slope)
        else:
            pre_state, sent = timed("aggregation", self._partial_states, z, source_score, pre_destination_score,
                                    negative_slope, dropout, training)
        received = self._rows(sent.reshape(len(sent), heads * width), layer).reshape(-1, heads, width)
        scalars = timed("aggregation", self._scalars_to_send, pre_state, source_score, layout["send_order"])
        got = self._float32(scalars[:, None], layout["send_counts"], layout["recv_counts"])[:, 0]
        if fused:
            return timed("aggregation", self._fused_merge, z, source_score, destination_score, received, got,
                         layout["recv_pre"], layout["recv_post"], negative_slope)
        return timed("aggregation", self._merge, z, source_score, destination_score, received, got,
                     layout["recv_pre"], layout["recv_post"], negative_slope, dropout, training)

    def _fused_partial_states(self, z, source_score, pre_destination_score, negative_slope):
        """:meth:`_partial_states` on the numba kernels (no attention dropout)."""
        heads, width = z.shape[1:]
        partial, maxima, sums = _FusedAttention.apply(
            z, source_score, pre_destination_score, z.new_empty((0, heads, width)), z.new_empty((0, heads)),
            z.new_empty((0, heads)), self.sender_csr, negative_slope, False)
        sent = torch.cat([partial, z[self.routes.post_sources]])[self.routes.send_order]
        return torch.cat([sums, maxima], 1), sent

    def _fused_merge(self, z, source_score, destination_score, received, scalars, pre_positions, post_positions,
                     negative_slope):
        """:meth:`_merge` on the numba kernels (no attention dropout)."""
        routes, heads = self.routes, z.shape[1]
        pre_state = scalars[pre_positions]
        values = torch.cat([z, received[routes.post_buffer_rows]])
        source_scores = torch.cat([source_score, scalars[post_positions]])
        out, _, _ = _FusedAttention.apply(values, source_scores, destination_score, received[routes.pre_buffer_rows],
                                          pre_state[:, :heads], pre_state[:, heads:].detach(), self.owner_csr,
                                          negative_slope, True)
        return out

    def _partial_states(self, z, source_score, pre_destination_score, negative_slope, dropout, training):
        """The PRE rows' (s, m) and the rows to send: each PRE row's r, then each POST source's z."""
        routes = self.routes
        rows, sources = routes.pre_edge_row, routes.pre_edge_source
        scores = F.leaky_relu(pre_destination_score[rows] + source_score[sources], negative_slope)
        maxima = segment_max(scores, rows, routes.num_pre_rows)
        weights = torch.exp(scores - maxima[rows])
        sums = weights.new_zeros((routes.num_pre_rows, weights.shape[1])).index_add_(0, rows, weights)
        kept = F.dropout(weights, dropout, training)
        partial = z.new_zeros((routes.num_pre_rows, *z.shape[1:])).index_add_(0, rows, kept[..., None] * z[sources])
        sent = torch.cat([partial, z[routes.post_sources]])[routes.send_order]
        return torch.cat([sums, maxima], 1), sent

    def _scalars_to_send(self, pre_state, source_score, order):
        return torch.cat([pre_state.reshape(-1), source_score[self.routes.post_sources].reshape(-1)])[order]

    def _merge(self, z, source_score, destination_score, received, scalars, pre_positions, post_positions,
               negative_slope, dropout, training):
        """The owner's sum: direct edges one by one, PRE rows by their states."""
        routes, n, heads = self.routes, len(z), z.shape[1]
        pre_state = scalars[pre_positions]
        pre_sums, pre_maxima = pre_state[:, :heads], pre_state[:, heads:].detach()
        values = torch.cat([z, received[routes.post_buffer_rows]])
        source_scores = torch.cat([source_score, scalars[post_positions]])
        destination, source = routes.direct_destination, routes.direct_source
        scores = F.leaky_relu(destination_score[destination] + source_scores[source], negative_slope)
        maxima = segment_max(torch.cat([scores, pre_maxima]), torch.cat([destination, routes.pre_destination]), n)
        weights = torch.exp(scores - maxima[destination])
        rescale = torch.exp(pre_maxima - maxima[routes.pre_destination])
        denominator = (weights.new_zeros((n, heads)).index_add_(0, destination, weights)
                       .index_add_(0, routes.pre_destination, rescale * pre_sums))
        kept = F.dropout(weights, dropout, training)
        numerator = (z.new_zeros(z.shape).index_add_(0, destination, kept[..., None] * values[source])
                     .index_add_(0, routes.pre_destination, rescale[..., None] * received[routes.pre_buffer_rows]))
        return numerator / denominator[..., None]
