"""The GraphSAGE layer (:mod:`supergcn.models.sage`) and its PyG counterpart.

    h'_v = W_n mean_{u in N(v)} h_u + b + W_s h_v.

In float32 the two projections are two GEMMs, the root term's fused into an accumulating
one, as PyG's ``SAGEConv`` computes them (the exactness tests hold ours to PyG's). Where
the GEMMs run in bfloat16 they are one GEMM over the concatenation, as GraphSAGE's paper
writes the layer, ``W · CONCAT(h_N(v), h_v)``:

* aggregating first: ``[mean(h) | h] [W_n | W_s]^T`` (K = 2F), whose float32 accumulator
  sums both terms before one rounding to bfloat16, then ``+ b`` in float32: by the
  activation kernel as it reads the product, in a hidden layer (:class:`BiasedProduct`),
  else by :func:`~supergcn.kernels.widening.widening_add`;
* projecting first: ``h [W_n; W_s]^T`` (N = 2 out), one read of h for both terms, whose
  first half is aggregated and the second added to it in float32.

A first layer whose input is kept factored (label inputs or an input norm:
:class:`~supergcn.models.inputs.LabelledInput`) keeps the two GEMMs of the factored form.

A bfloat16 GEMM as tall as a rank's rows is bound by memory (reading h) more than by its
arithmetic, and its weight gradient ``G^T [mean(h) | h]`` costs about what one of the two
separate ones costs, so the epoch makes one pass over h and G where two GEMMs made two
(measured on the arxiv shape: docs/results.md, "In bfloat16"). Autograd keeps the two
blocks, not their concatenation (built again in backward), so a rank holds no more than
with two GEMMs.
"""

from __future__ import annotations

import torch
from torch import nn

from supergcn.models.inputs import (
    BiasedProduct,
    LabelledInput,
    add,
    affine,
    aggregate_and_project,
    concatenated,
    plain_rows,
    projected,
    widened_sum,
)
from supergcn.models.ops import Ops
from supergcn.models.sage import CARD


class Layer(nn.Module):
    """One GraphSAGE convolution (:mod:`supergcn.models.sage`).

    Args:
        in_dim: input features.
        out_dim: output features.
        last: whether it is the model's last layer (a hidden one computing in bfloat16 leaves
            its bias to the activation: :class:`~supergcn.models.inputs.BiasedProduct`).
        dense_dtype: the type the linear layers' GEMMs run in.
        aggregate_first: aggregate input-width rows even where the output is narrower.
    """

    def __init__(self, in_dim: int, out_dim: int, last: bool = False, dense_dtype: torch.dtype = torch.float32,
                 aggregate_first: bool = False, **_other_models_options) -> None:
        super().__init__()
        self.lin_neigh = nn.Linear(in_dim, out_dim, bias=True)
        self.lin_self = nn.Linear(in_dim, out_dim, bias=False)
        self.dense_dtype = dense_dtype
        self.transform_first = CARD.layer_transforms_first(in_dim, out_dim, aggregate_first)
        self.last = last

    def forward(self, x: torch.Tensor | LabelledInput, ops: Ops) -> torch.Tensor:
        """The layer on the rank's rows.

        Args:
            x: n x ``in_dim`` input, plain or factored (:class:`~supergcn.models.inputs.LabelledInput`).
            ops: the rank's aggregations.

        Returns:
            n x ``out_dim`` float32 rows; for a hidden layer aggregating first in bfloat16,
            its GEMM's bfloat16 product and the bias still to add (:class:`BiasedProduct`).
        """
        weight, bias, dtype = self.lin_neigh.weight, self.lin_neigh.bias, self.dense_dtype
        rows = plain_rows(x)
        if dtype == torch.bfloat16 and rows is not None:
            return self._concatenated(rows, ops)
        if self.transform_first:
            neigh = add(ops.mean(projected(x, weight, dtype)), bias)
        else:
            neigh = aggregate_and_project(x, ops, ops.mean, weight, bias, dtype, widen=False)
        return projected(ops.destinations(x), self.lin_self.weight, dtype, neigh)

    def _concatenated(self, rows: torch.Tensor, ops: Ops) -> torch.Tensor | BiasedProduct:
        """The layer with one bfloat16 GEMM for both projections (module docstring)."""
        neigh, own, bias = self.lin_neigh.weight, self.lin_self.weight, self.lin_neigh.bias
        if self.transform_first:
            width = neigh.shape[0]
            both = affine(rows, torch.cat([neigh, own]), None, self.dense_dtype, False)
            aggregated = add(ops.mean(both[:, :width]), bias)
            return widened_sum(aggregated, ops.destinations(both)[:, width:])
        product = concatenated(ops.mean(rows), ops.destinations(rows), torch.cat([neigh, own], dim=1))
        return widened_sum(product, bias) if self.last else BiasedProduct(product, bias)


def pyg_conv(in_dim: int, out_dim: int, last: bool, heads: int) -> nn.Module:
    """PyG's ``SAGEConv`` for one layer.

    Args:
        in_dim: input features.
        out_dim: output features.
        last: whether it is the last layer.
        heads: unused (attention heads).

    Returns:
        The PyG module.
    """
    from torch_geometric.nn import SAGEConv

    return SAGEConv(in_dim, out_dim, aggr="mean", root_weight=True)


@torch.no_grad()
def copy_to_pyg(layer: Layer, conv: nn.Module) -> None:
    """Give PyG's convolution exactly ``layer``'s parameters.

    Args:
        layer: ours.
        conv: :func:`pyg_conv`'s.
    """
    conv.lin_l.weight.copy_(layer.lin_neigh.weight)
    conv.lin_l.bias.copy_(layer.lin_neigh.bias)
    conv.lin_r.weight.copy_(layer.lin_self.weight)
