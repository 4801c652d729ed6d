"""The GNNs trained here: GraphSAGE and GCN over :class:`~supergcn.distributed.aggregation.GraphOps`.

GraphSAGE layer (upstream SuperGCN, PyG ``SAGEConv(aggr="mean", root_weight=True)``):

    h_v = W_neigh · mean_{u in N(v)} x_u + b + W_self · x_v

GCN layer (PyG ``GCNConv``): h = Â_sym (X W^T) + b with self loops added where missing.

Hidden layers run conv -> dropout -> LayerNorm -> ReLU (the upstream order), fused in one
kernel (:mod:`supergcn.kernels.activation`); the last layer's output goes through
log_softmax. Because aggregation is linear, a layer whose
output is narrower than its input transforms first and aggregates the narrower rows,
which exchanges fewer bytes and gives the same result up to float rounding;
``aggregate_first`` always aggregates first, as upstream SuperGCN does (so its exchanges
carry input-width rows: the paper's Table 5 volumes).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from supergcn.distributed.aggregation import GraphOps
from supergcn.kernels.activation import dropout_norm_relu
from supergcn.naming import DENSE_DTYPES, GNN_MODELS


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
           dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``x W^T + b`` computed in ``dtype`` (float32, or bfloat16 for CPUs with bf16 GEMMs);
    the result is float32 either way, as are the parameters and their gradients."""
    if dtype == torch.float32:
        return F.linear(x, weight, bias)
    return F.linear(x.to(dtype), weight.to(dtype), None if bias is None else bias.to(dtype)).float()


class SAGELayer(nn.Module):
    def __init__(self, in_dim: int, out_dim: int, dense_dtype: torch.dtype = torch.float32,
                 aggregate_first: bool = False) -> None:
        super().__init__()
        self.lin_neigh = nn.Linear(in_dim, out_dim, bias=True)
        self.lin_self = nn.Linear(in_dim, out_dim, bias=False)
        self.dense_dtype = dense_dtype
        self.transform_first = out_dim < in_dim and not aggregate_first

    def forward(self, x: torch.Tensor, ops: GraphOps) -> torch.Tensor:
        weight, bias = self.lin_neigh.weight, self.lin_neigh.bias
        if self.transform_first:
            neigh = ops.mean(ops.timed("dense", linear, x, weight, None, self.dense_dtype))
            neigh = ops.timed("dense", torch.add, neigh, bias)
        else:
            neigh = ops.timed("dense", linear, ops.mean(x), weight, bias, self.dense_dtype)
        return ops.timed("dense", self._add_self, neigh, x)

    def _add_self(self, neigh: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        if self.dense_dtype == torch.float32:
            return torch.addmm(neigh, x, self.lin_self.weight.t())  # the sum fused into the GEMM
        return neigh + linear(x, self.lin_self.weight, None, self.dense_dtype)


class GCNLayer(nn.Module):
    def __init__(self, in_dim: int, out_dim: int, dense_dtype: torch.dtype = torch.float32,
                 aggregate_first: bool = False) -> None:
        super().__init__()
        self.lin = nn.Linear(in_dim, out_dim, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_dim))
        self.dense_dtype = dense_dtype
        self.transform_first = out_dim <= in_dim and not aggregate_first

    def forward(self, x: torch.Tensor, ops: GraphOps) -> torch.Tensor:
        if self.transform_first:
            aggregated = ops.gcn(ops.timed("dense", linear, x, self.lin.weight, None, self.dense_dtype))
        else:
            aggregated = ops.timed("dense", linear, ops.gcn(x), self.lin.weight, None, self.dense_dtype)
        return ops.timed("dense", torch.add, aggregated, self.bias)


class GNN(nn.Module):
    """A stack of ``num_layers`` SAGE or GCN layers with the upstream hidden-layer order.

    ``label_propagation`` adds masked label propagation (UniMP, PyG's ``MaskLabel``): a
    learned embedding of the label, ``E[y_v]`` (one row of width ``in_dim`` per class), is
    added to the input features of the nodes passed as ``label_nodes``. ``input_norm``
    applies LayerNorm to the input (after the label embedding) before the first layer, so
    that, as in the paper's §6.1, every layer's input is normalised (the hidden layers'
    LayerNorm already precedes the next layer).

    Args:
        model: ``sage`` or ``gcn`` (:data:`supergcn.naming.GNN_MODELS`).
        in_dim, hidden, out_dim: input features, hidden width, classes.
        num_layers: graph convolutions; all but the last are followed by dropout,
            LayerNorm (``layer_norm``) and ReLU.
        dropout: dropout probability after each hidden convolution.
        dense_dtype: ``float32`` or ``bfloat16``, the type the linear layers' GEMMs run in
            (:func:`linear`); aggregation, normalisation and parameters stay float32.
        aggregate_first: aggregate before the linear layer in every layer (upstream), not
            only where the output is at least as wide as the input.

    ``forward(x, ops, label_nodes, labels)`` returns the n x out_dim log-probabilities of
    the rank's rows; ``ops`` is the rank's :class:`GraphOps`. Every step is booked to a
    phase of the rank's timer (:mod:`supergcn.distributed.timing`): the linear layers to
    ``dense``, aggregations to ``aggregation``, the rest to ``elementwise``.
    """

    def __init__(self, model: str, in_dim: int, hidden: int, out_dim: int, num_layers: int = 3,
                 dropout: float = 0.5, layer_norm: bool = True, label_propagation: bool = False,
                 input_norm: bool = False, dense_dtype: str = "float32", aggregate_first: bool = False) -> None:
        super().__init__()
        if model not in GNN_MODELS:
            raise ValueError(f"unknown model {model!r}: choose one of {GNN_MODELS}")
        layer = {"sage": SAGELayer, "gcn": GCNLayer}[model]
        dims = [in_dim] + [hidden] * (num_layers - 1) + [out_dim]
        if dense_dtype not in DENSE_DTYPES:
            raise ValueError(f"unknown dense dtype {dense_dtype!r}: choose one of {DENSE_DTYPES}")
        self.convs = nn.ModuleList(layer(a, b, getattr(torch, dense_dtype), aggregate_first)
                                   for a, b in zip(dims[:-1], dims[1:]))
        self.norms = nn.ModuleList(nn.LayerNorm(hidden) if layer_norm else nn.Identity()
                                   for _ in range(num_layers - 1))
        self.label_embedding = nn.Embedding(out_dim, in_dim) if label_propagation else None
        self.input_norm = nn.LayerNorm(in_dim) if input_norm else nn.Identity()
        self.dropout = dropout

    def forward(self, x: torch.Tensor, ops: GraphOps, label_nodes: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> torch.Tensor:
        if self.label_embedding is not None and label_nodes is not None:
            x = ops.timed("elementwise", self._add_label_embedding, x, label_nodes, labels)
        x = ops.timed("elementwise", self.input_norm, x)
        for conv, norm in zip(self.convs[:-1], self.norms):
            x = ops.timed("elementwise", self._activate, conv(x, ops), norm)
        return ops.timed("elementwise", F.log_softmax, self.convs[-1](x, ops), -1)

    def _add_label_embedding(self, x: torch.Tensor, label_nodes: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return x.index_add(0, label_nodes, self.label_embedding(labels))

    def _activate(self, x: torch.Tensor, norm: nn.Module) -> torch.Tensor:
        drawing = self.training and 0 < self.dropout < 1
        seed = int(torch.randint(2**62, ()).item()) if drawing else 0  # from the rank's torch stream
        return dropout_norm_relu(x, norm if isinstance(norm, nn.LayerNorm) else None, self.dropout, self.training,
                                 seed)
