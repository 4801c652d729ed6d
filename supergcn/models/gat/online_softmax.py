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
torch operations (E x H x C intermediates, like PyG's), the reference path.

Overlap (the numba path, as SAGE's exchange overlaps its local aggregation): the rows and
scalars travel while the owner computes the state of its local edges and self loops (one
more piece of the merge), in pieces with a poll between
(:class:`~supergcn.kernels.attention.Progress`); backward,
their gradients travel back while that state's gradient is computed. The destination
scores (H per PRE row) travel alone, before the PRE states can be formed. Splitting the
owner's sum costs a pass over its rows, so without ``overlap``, at P = 1 and on the torch
path the exchanges are synchronous and the owner sums in one pass.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from supergcn.distributed.comm import MESSAGE_KINDS
from supergcn.distributed.rank_operators import RankOperators
from supergcn.kernels.attention import AttentionCsr, FusedAttention, Progress
from supergcn.models.gat.routes import AttentionRoutes

#: The kind of message the attention scalars are counted under (:data:`~supergcn.distributed.comm.MESSAGE_KINDS`).
ATTENTION_KIND = MESSAGE_KINDS[2]


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


class _Flight:
    """One layer's rows and scalars in flight (:meth:`DistributedAttention.__call__`): started
    by :class:`_Start` and finished by :class:`_Finish` forward; backward, the gradients
    start in :class:`_Finish`'s backward and finish in :class:`_Start`'s, the local work
    running between."""

    def __init__(self, operators: RankOperators, layer: int, layout: dict) -> None:
        self.operators, self.layer, self.layout = operators, layer, layout
        self._rows = self._scalars = None

    def start(self, rows: torch.Tensor, scalars: torch.Tensor, reverse: bool) -> None:
        operators, counts = self.operators, (self.layout["send_counts"], self.layout["recv_counts"])
        send, receive = counts[::-1] if reverse else counts
        self._rows = operators.start_exchange(rows, reverse=reverse, layer=self.layer)
        with operators.timer.phase("communication"):
            self._scalars = operators.communicator.ialltoallv(scalars.contiguous().numpy(), send, receive,
                                                              kind=ATTENTION_KIND)

    def progress(self, width: int) -> Progress:
        """How local work leaves room for this exchange of ``width``-wide rows."""
        return Progress(self.operators.pieces_beside(width), self.poll)

    def poll(self) -> None:
        if self._rows is not None:
            self._rows.poll()
            self._scalars.test()

    def finish(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The rows and scalars received."""
        rows, scalars, self._rows, self._scalars = self._rows, self._scalars, None, None
        received = rows.finish().clone()  # the exchange's buffer is the next one's
        with self.operators.timer.phase("communication"):
            return received, torch.from_numpy(scalars.wait())


class _Start(torch.autograd.Function):
    """Starts a layer's rows and scalars (:class:`_Flight`); returns a token its finish and
    the local work take, so that backward finishes the gradients after that work."""

    @staticmethod
    def forward(ctx, rows, scalars, flight: _Flight):
        flight.start(rows, scalars, reverse=False)
        ctx.flight = flight
        return rows.new_empty(0)

    @staticmethod
    def backward(ctx, _token):
        grad_rows, grad_scalars = ctx.flight.finish()
        return grad_rows, grad_scalars, None


class _Finish(torch.autograd.Function):
    """Waits for a layer's rows and scalars; backward starts their gradients' way back."""

    @staticmethod
    def forward(ctx, token, flight: _Flight):
        ctx.flight = flight
        return flight.finish()

    @staticmethod
    def backward(ctx, grad_rows, grad_scalars):
        ctx.flight.start(grad_rows, grad_scalars, reverse=True)
        return grad_rows.new_empty(0), None


class _After(torch.autograd.Function):
    """``x`` itself, used after ``token``: backward hands ``token`` its (empty) gradient
    only once ``x``'s has been computed."""

    @staticmethod
    def forward(ctx, x, token):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad, grad.new_empty(0)


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
        # Overlapping splits the owner's sum in two (local, then POST edges and the states),
        # which costs a pass over the owned rows: only where there is an exchange to hide.
        self.overlapped = self.fused and operators.settings.overlap and operators.communicator.size > 1
        if self.fused:
            n = operators.plan.num_owned
            self.sender_csr = AttentionCsr(routes.pre_edge_row.numpy(), routes.pre_edge_source.numpy(),
                                           routes.num_pre_rows, n)
            destination, source = routes.direct_destination.numpy(), routes.direct_source.numpy()
            if self.overlapped:
                local, post = source < n, source >= n
                self.local_csr = AttentionCsr(destination[local], source[local], n, n)
                # POST edges over the received POST rows; pieces: the PRE rows' states, then the local ones
                self.post_csr = AttentionCsr(destination[post], source[post] - n, n, len(routes.post_buffer_rows),
                                             np.concatenate([routes.pre_destination.numpy(), np.arange(n)]))
            else:  # every direct edge over the owned rows followed by the POST rows; pieces: the PRE rows' states
                self.owner_csr = AttentionCsr(destination, source, n, n + len(routes.post_buffer_rows),
                                              routes.pre_destination.numpy())

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
        if self.fused and not (training and dropout > 0):
            return self._fused(z, source_score, destination_score, pre_destination_score, layer, layout,
                               negative_slope)
        pre_state, sent = timed("aggregation", self._partial_states, z, source_score, pre_destination_score,
                                negative_slope, dropout, training)
        received = self._rows(sent.reshape(len(sent), heads * width), layer).reshape(-1, heads, width)
        scalars = timed("aggregation", self._scalars_to_send, pre_state, source_score, layout["send_order"])
        got = self._float32(scalars[:, None], layout["send_counts"], layout["recv_counts"])[:, 0]
        return timed("aggregation", self._merge, z, source_score, destination_score, received, got,
                     layout["recv_pre"], layout["recv_post"], negative_slope, dropout, training)

    def _fused(self, z, source_score, destination_score, pre_destination_score, layer, layout, negative_slope):
        """:meth:`__call__` on the numba kernels: the PRE rows' states and the POST rows start
        their way with their scalars; the owned rows' state over local edges and self loops
        is computed while they travel (and its gradient while theirs travel back); the
        POST edges and every state then merge."""
        timed, heads, width = self.operators.timer.timed, z.shape[1], z.shape[2]
        pre_state, sent = timed("aggregation", self._fused_partial_states, z, source_score, pre_destination_score,
                                negative_slope)
        scalars = timed("aggregation", self._scalars_to_send, pre_state, source_score, layout["send_order"])
        if not self.overlapped:
            received = self._rows(sent.reshape(len(sent), heads * width), layer).reshape(-1, heads, width)
            got = self._float32(scalars[:, None], layout["send_counts"], layout["recv_counts"])[:, 0]
            return timed("aggregation", self._fused_merge_in_one, z, source_score, destination_score, received, got,
                         layout, negative_slope)
        flight = _Flight(self.operators, layer, layout)
        token = _Start.apply(sent.reshape(len(sent), heads * width), scalars[:, None], flight)
        progress = flight.progress(heads * width)
        local, local_maxima, local_sums = timed("aggregation", FusedAttention.apply, _After.apply(z, token),
                                                source_score, destination_score, z.new_empty((0, heads, width)),
                                                z.new_empty((0, heads)), z.new_empty((0, heads)), self.local_csr,
                                                negative_slope, False, progress)
        received, got = _Finish.apply(token, flight)
        return timed("aggregation", self._fused_merge, received.reshape(-1, heads, width), got[:, 0],
                     destination_score, local, local_sums, local_maxima, layout, negative_slope)

    def _fused_partial_states(self, z, source_score, pre_destination_score, negative_slope):
        """:meth:`_partial_states` on the numba kernels (no attention dropout)."""
        heads, width = z.shape[1:]
        partial, maxima, sums = FusedAttention.apply(
            z, source_score, pre_destination_score, z.new_empty((0, heads, width)), z.new_empty((0, heads)),
            z.new_empty((0, heads)), self.sender_csr, negative_slope, False)
        sent = torch.cat([partial, z[self.routes.post_sources]])[self.routes.send_order]
        return torch.cat([sums, maxima], 1), sent

    def _fused_merge_in_one(self, z, source_score, destination_score, received, scalars, layout, negative_slope):
        """The owner's sum on the numba kernels in one pass: every direct edge (local, self
        loop, POST) one by one over the owned rows followed by the POST rows, the PRE rows'
        states as pieces."""
        routes, heads = self.routes, z.shape[1]
        pre_state = scalars[layout["recv_pre"]]
        values = torch.cat([z, received[routes.post_buffer_rows]])
        source_scores = torch.cat([source_score, scalars[layout["recv_post"]]])
        out, _, _ = FusedAttention.apply(values, source_scores, destination_score, received[routes.pre_buffer_rows],
                                          pre_state[:, :heads], pre_state[:, heads:].detach(), self.owner_csr,
                                          negative_slope, True)
        return out

    def _fused_merge(self, received, scalars, destination_score, local, local_sums, local_maxima, layout,
                     negative_slope):
        """The owner's sum on the numba kernels: POST edges one by one, the PRE rows' and the
        local states as pieces."""
        routes, heads = self.routes, destination_score.shape[1]
        pre_state = scalars[layout["recv_pre"]]
        out, _, _ = FusedAttention.apply(received[routes.post_buffer_rows], scalars[layout["recv_post"]],
                                          destination_score, torch.cat([received[routes.pre_buffer_rows], local]),
                                          torch.cat([pre_state[:, :heads], local_sums]),
                                          torch.cat([pre_state[:, heads:], local_maxima]).detach(), self.post_csr,
                                          negative_slope, True)
        return out

    def _partial_states(self, z, source_score, pre_destination_score, negative_slope, dropout, training):
        """The PRE rows' (s, m) and the rows to send: each PRE row's r, then each POST source's z."""
        routes = self.routes
        rows, sources = routes.pre_edge_row, routes.pre_edge_source
        # index_select, not [...]: the edges repeat their ends, and float32 indexing's backward
        # adds with atomics on several threads (bits that change from run to run)
        scores = F.leaky_relu(pre_destination_score.index_select(0, rows) + source_score.index_select(0, sources),
                              negative_slope)
        maxima = segment_max(scores, rows, routes.num_pre_rows)
        weights = torch.exp(scores - maxima[rows])
        sums = weights.new_zeros((routes.num_pre_rows, weights.shape[1])).index_add_(0, rows, weights)
        kept = F.dropout(weights, dropout, training)
        edge_values = kept[..., None] * z.index_select(0, sources)
        partial = z.new_zeros((routes.num_pre_rows, *z.shape[1:])).index_add_(0, rows, edge_values)
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
        scores = F.leaky_relu(destination_score.index_select(0, destination) + source_scores.index_select(0, source),
                              negative_slope)  # index_select: see _partial_states
        maxima = segment_max(torch.cat([scores, pre_maxima]), torch.cat([destination, routes.pre_destination]), n)
        weights = torch.exp(scores - maxima[destination])
        rescale = torch.exp(pre_maxima - maxima[routes.pre_destination])
        denominator = (weights.new_zeros((n, heads)).index_add_(0, destination, weights)
                       .index_add_(0, routes.pre_destination, rescale * pre_sums))
        kept = F.dropout(weights, dropout, training)
        numerator = (z.new_zeros(z.shape).index_add_(0, destination, kept[..., None] * values.index_select(0, source))
                     .index_add_(0, routes.pre_destination, rescale[..., None] * received[routes.pre_buffer_rows]))
        return numerator / denominator[..., None]


def rank_attention(ops) -> DistributedAttention:
    """The rank's :class:`DistributedAttention`, the full graph's form of GAT's attention
    (:data:`supergcn.models.gat.layer.ATTENTION`), built (collectively) once per rank through
    :meth:`~supergcn.distributed.graph_ops.GraphOps.cached`.

    Args:
        ops: the rank's aggregations over the full graph (their exchange and operators).

    Returns:
        Its attention.
    """
    return DistributedAttention(ops.operators)
