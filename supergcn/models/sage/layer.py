"""The GraphSAGE layer (:mod:`supergcn.models.sage`) and its PyG counterpart."""

from __future__ import annotations

import torch
from torch import nn

from supergcn.models.inputs import LabelledInput, add, aggregate_and_project, projected
from supergcn.models.ops import Ops
from supergcn.models.sage import CARD


class Layer(nn.Module):
    """One GraphSAGE convolution (:mod:`supergcn.models.sage`).

    Args:
        in_dim: input features.
        out_dim: output features.
        last: whether it is the model's last layer (nothing differs).
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

    def forward(self, x: torch.Tensor | LabelledInput, ops: Ops) -> torch.Tensor:
        """The layer on the rank's rows.

        Args:
            x: n x ``in_dim`` input, plain or factored (:class:`~supergcn.models.inputs.LabelledInput`).
            ops: the rank's aggregations.

        Returns:
            n x ``out_dim`` float32 rows.
        """
        weight, bias, dtype = self.lin_neigh.weight, self.lin_neigh.bias, self.dense_dtype
        if self.transform_first:
            neigh = add(ops.mean(projected(x, weight, dtype)), bias)
        else:
            neigh = aggregate_and_project(x, ops, ops.mean, weight, bias, dtype, widen=False)
        return projected(ops.destinations(x), self.lin_self.weight, dtype, neigh)


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
