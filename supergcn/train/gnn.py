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
from supergcn.train.inputs import InputNorm, LabelledInput, aggregate_and_project, project


class SAGELayer(nn.Module):
    """One GraphSAGE convolution (module docstring) with PyG's mean aggregation and root weight.

    Args:
        in_dim: input features.
        out_dim: output features.
        dense_dtype: the type the linear layers' GEMMs run in.
        aggregate_first: aggregate input-width rows even where the output is narrower.
    """
    def __init__(self, in_dim: int, out_dim: int, dense_dtype: torch.dtype = torch.float32,
                 aggregate_first: bool = False) -> None:
        super().__init__()
        self.lin_neigh = nn.Linear(in_dim, out_dim, bias=True)
        self.lin_self = nn.Linear(in_dim, out_dim, bias=False)
        self.dense_dtype = dense_dtype
        self.transform_first = out_dim < in_dim and not aggregate_first

    def forward(self, x: torch.Tensor | LabelledInput, ops: GraphOps) -> torch.Tensor:
        """The layer on the rank's rows.

        Args:
            x: n x ``in_dim`` input, plain or factored (:class:`~supergcn.train.inputs.LabelledInput`).
            ops: the rank's aggregations.

        Returns:
            n x ``out_dim`` float32 rows.
        """
        weight, bias = self.lin_neigh.weight, self.lin_neigh.bias
        if self.transform_first:
            neigh = ops.mean(ops.timed("dense", project, x, weight, self.dense_dtype))
            neigh = ops.timed("dense", torch.add, neigh, bias)
        else:
            neigh = aggregate_and_project(x, ops, ops.mean, weight, bias, self.dense_dtype)
        return ops.timed("dense", project, x, self.lin_self.weight, self.dense_dtype, neigh)


class GCNLayer(nn.Module):
    """One GCN convolution (module docstring), symmetric normalisation with self loops.

    Args:
        in_dim: input features.
        out_dim: output features.
        dense_dtype: the type the linear layer's GEMM runs in.
        aggregate_first: aggregate input-width rows even where the output is not wider.
    """
    def __init__(self, in_dim: int, out_dim: int, dense_dtype: torch.dtype = torch.float32,
                 aggregate_first: bool = False) -> None:
        super().__init__()
        self.lin = nn.Linear(in_dim, out_dim, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_dim))
        self.dense_dtype = dense_dtype
        self.transform_first = out_dim <= in_dim and not aggregate_first

    def forward(self, x: torch.Tensor | LabelledInput, ops: GraphOps) -> torch.Tensor:
        """The layer on the rank's rows.

        Args:
            x: n x ``in_dim`` input, plain or factored (:class:`~supergcn.train.inputs.LabelledInput`).
            ops: the rank's aggregations.

        Returns:
            n x ``out_dim`` float32 rows.
        """
        if self.transform_first:
            aggregated = ops.gcn(ops.timed("dense", project, x, self.lin.weight, self.dense_dtype))
        else:
            aggregated = aggregate_and_project(x, ops, ops.gcn, self.lin.weight, None, self.dense_dtype)
        return ops.timed("dense", torch.add, aggregated, self.bias)


class GNN(nn.Module):
    """A stack of ``num_layers`` SAGE or GCN layers with the upstream hidden-layer order.

    ``label_propagation`` adds masked label propagation (UniMP, PyG's ``MaskLabel``): a
    learned embedding of the label, ``E[y_v]`` (one row of width ``in_dim`` per class), is
    added to the input features of the nodes passed as ``label_nodes``. ``input_norm``
    applies LayerNorm to the input (after the label embedding) before the first layer, so
    that, as in the paper's §6.1, every layer's input is normalised (the hidden layers'
    LayerNorm already precedes the next layer). The first layer takes this input factored
    (:class:`~supergcn.train.inputs.LabelledInput`): the sum and the norm are written out
    only in the cases :mod:`supergcn.train.inputs` names.

    Args:
        model: ``sage`` or ``gcn`` (:data:`supergcn.naming.GNN_MODELS`).
        in_dim: input features.
        hidden: hidden width.
        out_dim: classes.
        num_layers: graph convolutions; all but the last are followed by dropout,
            LayerNorm (``layer_norm``) and ReLU.
        dropout: dropout probability after each hidden convolution.
        dense_dtype: ``float32`` or ``bfloat16``, the type the linear layers' GEMMs run in
            (:func:`~supergcn.train.inputs.linear`); aggregation, normalisation and parameters stay float32.
        aggregate_first: aggregate before the linear layer in every layer (upstream), not
            only where the output is at least as wide as the input.

    ``forward(x, ops, label_nodes, labels)`` returns the n x out_dim log-probabilities of
    the rank's rows; ``ops`` is the rank's :class:`GraphOps`. Every step is booked to a
    phase of the rank's timer (:mod:`supergcn.distributed.timing`): the linear layers to
    ``dense``, aggregations to ``aggregation``, the rest to ``elementwise``.

    Raises:
        ValueError: an unknown ``model`` or ``dense_dtype``.
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
        self.input_norm = InputNorm(in_dim) if input_norm else None
        self.dropout = dropout

    def forward(self, x: torch.Tensor, ops: GraphOps, label_nodes: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> torch.Tensor:
        """The log-probabilities of the rank's rows (class docstring).

        Args:
            x: the rank's n x ``in_dim`` input features.
            ops: the rank's aggregations.
            label_nodes: the nodes whose labels are fed as inputs (label propagation only).
            labels: their labels, in the order of ``label_nodes``.

        Returns:
            n x ``out_dim`` log-probabilities.
        """
        x = LabelledInput(x, self.input_norm, self.label_embedding, label_nodes, labels)
        for conv, norm in zip(self.convs[:-1], self.norms):
            x = ops.timed("elementwise", self._activate, conv(x, ops), norm)
        return ops.timed("elementwise", F.log_softmax, self.convs[-1](x, ops), -1)

    def _activate(self, x: torch.Tensor, norm: nn.Module) -> torch.Tensor:
        drawing = self.training and 0 < self.dropout < 1
        seed = int(torch.randint(2**62, ()).item()) if drawing else 0  # from the rank's torch stream
        return dropout_norm_relu(x, norm if isinstance(norm, nn.LayerNorm) else None, self.dropout, self.training,
                                 seed)
