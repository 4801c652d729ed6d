"""The GCN layer (:mod:`supergcn.models.gcn`), its normalisation and its PyG counterpart."""

from __future__ import annotations

import torch
from torch import nn

from supergcn.distributed.timing import phase
from supergcn.kernels.row_scaled import scaled_rows, self_loops_added
from supergcn.models.gcn import CARD
from supergcn.models.inputs import LabelledInput, add, aggregate_and_project, projected
from supergcn.models.ops import Ops, RankState


class Normalisation:
    """``d^{-1/2}`` of the rank's owned nodes, ``d = |N(v) ∪ {v}|`` with global in-degrees,
    and which of them lack a self loop in the graph (PyG adds one there).

    Args:
        ops: the rank's aggregations (their destinations' degrees and self loops).
    """

    def __init__(self, ops: Ops) -> None:
        self.missing_loop = (~ops.self_loops()).to(torch.float32)[:, None]
        self.inv_sqrt_degree = (ops.in_degree() + self.missing_loop[:, 0]).rsqrt()

    def aggregate(self, ops: Ops, x: torch.Tensor) -> torch.Tensor:
        """``Â_sym x`` (:mod:`supergcn.models.gcn`) through the exchange; differentiable.

        Args:
            ops: the rank's aggregations.
            x: n x F rows of the rank's nodes.

        Returns:
            n x F aggregated rows.
        """
        scaled = _scale(x, self.inv_sqrt_degree)
        return _add_self_loops(ops.sum(scaled, self.inv_sqrt_degree), scaled, self.missing_loop[:, 0],
                               self.inv_sqrt_degree)


#: The normalisation, built once per rank; a block's degrees are not the graph's, so it has no block form.
NORMALISATION = RankState(Normalisation)


@phase("aggregation")
def _scale(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    if x.dtype == torch.bfloat16 and x.dim() == 2:  # torch's expression in one pass each way
        return scaled_rows(x, scale)
    return (x * scale[:, None]).to(x.dtype)  # bfloat16 rows stay bfloat16 for the gather


@phase("aggregation")
def _add_self_loops(aggregated: torch.Tensor, scaled: torch.Tensor, missing_loop: torch.Tensor,
                    scale: torch.Tensor) -> torch.Tensor:
    if scaled.dtype == torch.bfloat16 and aggregated.dtype == torch.float32 and scaled.dim() == 2:
        return self_loops_added(aggregated, scaled, missing_loop, scale)  # the same, in one pass each way
    return aggregated + missing_loop[:, None] * scaled * scale[:, None]


class Layer(nn.Module):
    """One GCN convolution (:mod:`supergcn.models.gcn`).

    Args:
        in_dim: input features.
        out_dim: output features.
        last: whether it is the model's last layer (nothing differs).
        dense_dtype: the type the linear layer's GEMM runs in.
        aggregate_first: aggregate input-width rows even where the output is not wider.
    """

    def __init__(self, in_dim: int, out_dim: int, last: bool = False, dense_dtype: torch.dtype = torch.float32,
                 aggregate_first: bool = False, **_other_models_options) -> None:
        super().__init__()
        self.lin = nn.Linear(in_dim, out_dim, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_dim))
        self.dense_dtype = dense_dtype
        self.transform_first = CARD.layer_transforms_first(in_dim, out_dim, aggregate_first)

    def forward(self, x: torch.Tensor | LabelledInput, ops: Ops) -> torch.Tensor:
        """The layer on the rank's rows.

        Args:
            x: n x ``in_dim`` input, plain or factored (:class:`~supergcn.models.inputs.LabelledInput`).
            ops: the rank's aggregations.

        Returns:
            n x ``out_dim`` float32 rows.
        """
        norm = ops.cached(NORMALISATION)
        if self.transform_first:
            aggregated = norm.aggregate(ops, projected(x, self.lin.weight, self.dense_dtype))
        else:
            aggregated = aggregate_and_project(x, ops, lambda rows: norm.aggregate(ops, rows), self.lin.weight, None,
                                               self.dense_dtype)
        return add(aggregated, self.bias)


def pyg_conv(in_dim: int, out_dim: int, last: bool, heads: int) -> nn.Module:
    """PyG's ``GCNConv`` for one layer.

    Args:
        in_dim: input features.
        out_dim: output features.
        last: whether it is the last layer.
        heads: unused (attention heads).

    Returns:
        The PyG module.
    """
    from torch_geometric.nn import GCNConv

    return GCNConv(in_dim, out_dim)


@torch.no_grad()
def copy_to_pyg(layer: Layer, conv: nn.Module) -> None:
    """Give PyG's convolution exactly ``layer``'s parameters.

    Args:
        layer: ours.
        conv: :func:`pyg_conv`'s.
    """
    conv.lin.weight.copy_(layer.lin.weight)
    conv.bias.copy_(layer.bias)
