"""The GIN layer (:mod:`supergcn.models.gin`) and its PyG counterpart."""

from __future__ import annotations

import torch
from torch import nn

from supergcn.distributed.timing import phase
from supergcn.models.gin import CARD
from supergcn.models.inputs import LabelledInput, affine, aggregate_and_project, projected, relu
from supergcn.models.ops import Ops


class Layer(nn.Module):
    """One GIN convolution (:mod:`supergcn.models.gin`).

    Args:
        in_dim: input features.
        out_dim: output features (both layers of the MLP).
        last: whether it is the model's last layer (nothing differs).
        dense_dtype: the type the linear layers' GEMMs run in.
        aggregate_first: aggregate input-width rows even where the output is narrower.
    """

    def __init__(self, in_dim: int, out_dim: int, last: bool = False, dense_dtype: torch.dtype = torch.float32,
                 aggregate_first: bool = False, **_other_models_options) -> None:
        super().__init__()
        self.lin_in = nn.Linear(in_dim, out_dim)
        self.lin_out = nn.Linear(out_dim, out_dim)
        self.eps = nn.Parameter(torch.zeros(1))
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
        weight, bias, dtype = self.lin_in.weight, self.lin_in.bias, self.dense_dtype
        if self.transform_first:  # (1 + eps) x W^T + sum_u (x W^T)_u: the aggregation is linear
            rows = projected(x, weight, dtype)
            inner = _add_root(ops.sum(rows), rows, bias, self.eps)
        else:
            inner = projected(x, weight * (1 + self.eps), dtype, aggregate_and_project(x, ops, ops.sum, weight, bias,
                                                                                       dtype, widen=False))
        return affine(relu(inner), self.lin_out.weight, self.lin_out.bias, dtype)


@phase("dense")
def _add_root(aggregated: torch.Tensor, projected_rows: torch.Tensor, bias: torch.Tensor,
              eps: torch.Tensor) -> torch.Tensor:
    return torch.addcmul(aggregated + bias, projected_rows, 1 + eps)


def pyg_conv(in_dim: int, out_dim: int, last: bool, heads: int) -> nn.Module:
    """PyG's ``GINConv`` (a two-layer MLP, ``train_eps``) for one layer.

    Args:
        in_dim: input features.
        out_dim: output features.
        last: whether it is the last layer.
        heads: unused (attention heads).

    Returns:
        The PyG module.
    """
    from torch_geometric.nn import GINConv

    return GINConv(nn.Sequential(nn.Linear(in_dim, out_dim), nn.ReLU(), nn.Linear(out_dim, out_dim)), train_eps=True)


@torch.no_grad()
def copy_to_pyg(layer: Layer, conv: nn.Module) -> None:
    """Give PyG's convolution exactly ``layer``'s parameters.

    Args:
        layer: ours.
        conv: :func:`pyg_conv`'s.
    """
    conv.nn[0].load_state_dict(layer.lin_in.state_dict())
    conv.nn[2].load_state_dict(layer.lin_out.state_dict())
    conv.eps.copy_(layer.eps)
