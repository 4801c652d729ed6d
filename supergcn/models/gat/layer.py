"""The GAT layer (:mod:`supergcn.models.gat`) and its PyG counterpart."""

from __future__ import annotations

import torch
from torch import nn

from supergcn.distributed.timing import phase
from supergcn.models.gat.block_attention import block_attention
from supergcn.models.gat.online_softmax import rank_attention
from supergcn.models.inputs import LabelledInput, project
from supergcn.models.ops import Ops, RankState


class Layer(nn.Module):
    """One GAT convolution (:mod:`supergcn.models.gat`) with PyG's initialisation (Glorot
    weights and attention vectors, zero bias).

    Args:
        in_dim: input features.
        out_dim: output features: H x C when the heads are concatenated, else C.
        last: whether it is the model's last layer (heads averaged there, else concatenated).
        dense_dtype: the type the projection's GEMM runs in.
        heads: H.
        attention_dropout: dropout on the attention coefficients while training.
        negative_slope: LeakyReLU's slope.

    Raises:
        ValueError: concatenated heads that do not divide ``out_dim``.
    """

    def __init__(self, in_dim: int, out_dim: int, last: bool = False, dense_dtype: torch.dtype = torch.float32,
                 heads: int = 1, attention_dropout: float = 0.0, negative_slope: float = 0.2,
                 **_other_models_options) -> None:
        super().__init__()
        concat = not last
        if concat and out_dim % heads:
            raise ValueError(f"{heads} attention heads do not divide the hidden width {out_dim}: choose a width "
                             "that is a multiple of the heads")
        width = out_dim // heads if concat else out_dim
        self.lin = nn.Linear(in_dim, heads * width, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, heads, width))
        self.att_dst = nn.Parameter(torch.empty(1, heads, width))
        self.bias = nn.Parameter(torch.zeros(out_dim))
        nn.init.xavier_uniform_(self.lin.weight)
        bound = (6.0 / (heads + width)) ** 0.5  # PyG's glorot over an attention vector's last two dimensions
        nn.init.uniform_(self.att_src, -bound, bound)
        nn.init.uniform_(self.att_dst, -bound, bound)
        self.heads, self.width, self.concat = heads, width, concat
        self.dense_dtype, self.attention_dropout, self.negative_slope = dense_dtype, attention_dropout, negative_slope

    def forward(self, x: torch.Tensor | LabelledInput, ops: Ops) -> torch.Tensor:
        """The layer on the rank's rows.

        Args:
            x: n x ``in_dim`` input, plain or factored (:class:`~supergcn.models.inputs.LabelledInput`).
            ops: the rank's aggregations.

        Returns:
            n x ``out_dim`` float32 rows.
        """
        z = _project(x, self.lin.weight, self.dense_dtype, self.heads, self.width)
        attention = ops.cached(ATTENTION)  # built collectively by the first GAT layer
        out = attention(z, _score(z, self.att_src), _score(z, self.att_dst), ops.next_layer(), self.negative_slope,
                        self.attention_dropout, self.training)
        return _combine_heads(out, self.bias, self.concat)


#: GAT's aggregation, built once per rank: the online softmax across ranks over the full graph,
#: the local one over a mini-batch's block.
ATTENTION = RankState(rank_attention, block_attention)


@phase("dense")
def _project(x: torch.Tensor | LabelledInput, weight: torch.Tensor, dtype: torch.dtype, heads: int,
             width: int) -> torch.Tensor:
    # The attention kernels read float32 rows (a bf16 run's projection is bfloat16).
    return project(x, weight, dtype).float().view(-1, heads, width)


@phase("dense")
def _score(z: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
    return (z * attention).sum(-1)


@phase("elementwise")
def _combine_heads(out: torch.Tensor, bias: torch.Tensor, concat: bool) -> torch.Tensor:
    return (out.reshape(len(out), -1) if concat else out.mean(1)) + bias


def pyg_conv(in_dim: int, out_dim: int, last: bool, heads: int) -> nn.Module:
    """PyG's ``GATConv`` for one layer: heads concatenated, or averaged in the last.

    Args:
        in_dim: input features.
        out_dim: output features.
        last: whether it is the last layer.
        heads: H.

    Returns:
        The PyG module.
    """
    from torch_geometric.nn import GATConv

    return GATConv(in_dim, out_dim if last else out_dim // heads, heads=heads, concat=not last)


@torch.no_grad()
def copy_to_pyg(layer: Layer, conv: nn.Module) -> None:
    """Give PyG's convolution exactly ``layer``'s parameters.

    Args:
        layer: ours.
        conv: :func:`pyg_conv`'s.
    """
    conv.lin.weight.copy_(layer.lin.weight)
    conv.bias.copy_(layer.bias)
    conv.att_src.copy_(layer.att_src)
    conv.att_dst.copy_(layer.att_dst)
