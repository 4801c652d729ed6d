"""GAT's attention on one mini-batch block (DistGNN-MB's, :mod:`supergcn.methods.distgnn_mb`):
local, with nothing to exchange.

A block has ``num_dst`` destinations, which are its first ``num_dst`` sources (the sampler's
convention, :mod:`supergcn.kernels.sampling`), and the kept in-edges of each. As in the full
graph's attention (:mod:`supergcn.models.gat.online_softmax`), destination v attends over
N'(v) = (its kept sources without v) plus v itself, one self loop at source position v:

    e_vu = LeakyReLU(a_dst · z_v + a_src · z_u),   alpha_vu = exp(e_vu) / sum_{w in N'(v)} exp(e_vw),
    out_v = sum_{u in N'(v)} alpha_vu z_u,

per head, with z = x W^T over all sources. This is PyG's ``GATConv`` on the bipartite input
(x_src, x_dst = x_src[:num_dst]): it adds self loops to the nodes that are both source and
destination, the first min(num_src, num_dst) = num_dst of each, after removing any present.

The sum runs on the numba kernels of :mod:`supergcn.kernels.attention` over the block's
num_dst x num_src CSR, as the full graph's owner sum does at P = 1; with ``kernel="torch"``
and wherever attention dropout draws, on torch operations (the reference path), the dropout
(PyG's) applied to alpha: the kept weights scaled by 1 / (1 - p) in the numerator, the
denominator undropped.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from supergcn.distributed.timing import phase
from supergcn.kernels.attention import AttentionCsr, FusedAttention
from supergcn.models.gat.online_softmax import segment_max


class BlockAttention:
    """GAT's aggregation over one block (module docstring).

    Args:
        indptr: the block's CSR pointers over its destinations (kept edges only).
        indices: each kept edge's source position.
        num_src: the block's sources.
        kernel: ``numba`` (the fused kernels) or ``torch`` (torch operations).
    """

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, num_src: int, kernel: str = "numba") -> None:
        num_dst = len(indptr) - 1
        destination = np.repeat(np.arange(num_dst, dtype=np.int64), np.diff(indptr))
        source = np.asarray(indices, dtype=np.int64)
        other = source != destination  # a present self loop gives way to the one added below
        loops = np.arange(num_dst, dtype=np.int64)
        self.destination = torch.from_numpy(np.concatenate([destination[other], loops]))
        self.source = torch.from_numpy(np.concatenate([source[other], loops]))
        self.num_dst = num_dst
        self.csr = AttentionCsr(self.destination.numpy(), self.source.numpy(), num_dst, num_src) \
            if kernel == "numba" else None

    def __call__(self, z: torch.Tensor, source_score: torch.Tensor, destination_score: torch.Tensor,
                 layer: int, negative_slope: float = 0.2, dropout: float = 0.0, training: bool = False) -> torch.Tensor:
        """``out_v`` of the module docstring for every destination v.

        Args:
            z: num_src x H x C projected rows.
            source_score: num_src x H, a_src · z.
            destination_score: a_dst · z of at least the destinations (num_dst x H or more;
                the first num_dst rows are read).
            layer: the layer (the full graph's exchange key; a block exchanges nothing).
            negative_slope: LeakyReLU's slope.
            dropout: dropout on the attention coefficients, while ``training``.
            training: whether this is a training pass.

        Returns:
            num_dst x H x C aggregated rows.
        """
        destination_score = destination_score[:self.num_dst]
        if self.csr is None or (training and dropout > 0):
            return _edge_attention(z, source_score, destination_score, self.destination, self.source,
                                   negative_slope, dropout if training else 0.0)
        return _fused_attention(z, source_score, destination_score, self.csr, negative_slope)


def block_attention(ops) -> BlockAttention:
    """GAT's attention over a block, from the block's ops
    (:class:`~supergcn.methods.distgnn_mb.blocks.BlockOps`: its kept edges and kernels).

    Args:
        ops: the block's ops.

    Returns:
        Its attention.
    """
    return BlockAttention(ops.indptr, ops.indices, ops.num_src, ops.kernel)


@phase("aggregation")
def _fused_attention(z, source_score, destination_score, csr, negative_slope):
    heads, width = z.shape[1:]
    out, _, _ = FusedAttention.apply(z, source_score, destination_score, z.new_empty((0, heads, width)),
                                      z.new_empty((0, heads)), z.new_empty((0, heads)), csr, negative_slope, True)
    return out


@phase("aggregation")
def _edge_attention(z, source_score, destination_score, destination, source, negative_slope, dropout):
    """Edge by edge on torch: E x H weights, dropped on the numerator's side (none at 0)."""
    num_dst, heads = destination_score.shape
    # index_select, not [...]: the edges repeat their ends, and float32 indexing's backward
    # adds with atomics on several threads (bits that change from run to run)
    scores = F.leaky_relu(destination_score.index_select(0, destination) + source_score.index_select(0, source),
                          negative_slope)
    weights = torch.exp(scores - segment_max(scores, destination, num_dst)[destination])
    denominator = weights.new_zeros((num_dst, heads)).index_add_(0, destination, weights)
    kept = F.dropout(weights, dropout, True) if dropout > 0 else weights
    numerator = z.new_zeros((num_dst, *z.shape[1:])).index_add_(0, destination,
                                                                 kept[..., None] * z.index_select(0, source))
    return numerator / denominator[..., None]
