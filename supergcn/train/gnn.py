"""The GNNs trained here: GraphSAGE, GCN, GIN and GAT over :class:`~supergcn.distributed.aggregation.GraphOps`.

GraphSAGE layer (upstream SuperGCN, PyG ``SAGEConv(aggr="mean", root_weight=True)``):

    h_v = W_neigh · mean_{u in N(v)} x_u + b + W_self · x_v

GCN layer (PyG ``GCNConv``): h = Â_sym (X W^T) + b with self loops added where missing.

GIN layer (PyG ``GINConv`` with ``train_eps`` and a two-layer MLP):

    h_v = W_2 · ReLU(W_1 · ((1 + eps) x_v + sum_{u in N(v)} x_u) + b_1) + b_2

GAT layer (PyG ``GATConv``: H heads of C, LeakyReLU slope 0.2, self loops, attention
dropout): z = X W^T, and per head

    h_v = sum_{u in N(v) ∪ {v}} softmax_u(LeakyReLU(a_dst · z_v + a_src · z_u)) z_u,

the heads concatenated in hidden layers (C = hidden / H) and averaged in the last (C = the
classes), plus a bias. Its aggregation crosses ranks as an online softmax
(:mod:`supergcn.distributed.attention`); it always projects first (``aggregate_first``
does not apply: the scores are taken of the projected rows).

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
from supergcn.train.config import default
from supergcn.train.inputs import InputNorm, LabelledInput, aggregate_and_project, linear, project


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


class GINLayer(nn.Module):
    """One GIN convolution (module docstring), ``eps`` learned from 0 (PyG's ``train_eps``).

    Args:
        in_dim: input features.
        out_dim: output features (both layers of the MLP).
        dense_dtype: the type the linear layers' GEMMs run in.
        aggregate_first: aggregate input-width rows even where the output is narrower.
    """
    def __init__(self, in_dim: int, out_dim: int, dense_dtype: torch.dtype = torch.float32,
                 aggregate_first: bool = False) -> None:
        super().__init__()
        self.lin_in = nn.Linear(in_dim, out_dim)
        self.lin_out = nn.Linear(out_dim, out_dim)
        self.eps = nn.Parameter(torch.zeros(1))
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
        weight, bias, dtype = self.lin_in.weight, self.lin_in.bias, self.dense_dtype
        if self.transform_first:  # (1 + eps) x W^T + sum_u (x W^T)_u: the aggregation is linear
            projected = ops.timed("dense", project, x, weight, dtype)
            inner = ops.timed("dense", self._add_root, ops.sum(projected), projected)
        else:
            aggregated = aggregate_and_project(x, ops, ops.sum, weight, bias, dtype)
            inner = ops.timed("dense", project, x, weight * (1 + self.eps), dtype, aggregated)
        hidden = ops.timed("elementwise", F.relu, inner)
        return ops.timed("dense", linear, hidden, self.lin_out.weight, self.lin_out.bias, dtype)

    def _add_root(self, aggregated: torch.Tensor, projected: torch.Tensor) -> torch.Tensor:
        return torch.addcmul(aggregated + self.lin_in.bias, projected, 1 + self.eps)


class GATLayer(nn.Module):
    """One GAT convolution (module docstring) with PyG's initialisation (Glorot weights and
    attention vectors, zero bias).

    Args:
        in_dim: input features.
        out_dim: output features: H x C when the heads are concatenated, else C.
        heads: H.
        concat: concatenate the heads (hidden layers) or average them (the last).
        dense_dtype: the type the projection's GEMM runs in.
        attention_dropout: dropout on the attention coefficients while training.
        negative_slope: LeakyReLU's slope.

    Raises:
        ValueError: concatenated heads that do not divide ``out_dim``.
    """
    def __init__(self, in_dim: int, out_dim: int, heads: int, concat: bool, dense_dtype: torch.dtype = torch.float32,
                 attention_dropout: float = 0.0, negative_slope: float = 0.2) -> None:
        super().__init__()
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

    def forward(self, x: torch.Tensor | LabelledInput, ops: GraphOps) -> torch.Tensor:
        """The layer on the rank's rows.

        Args:
            x: n x ``in_dim`` input, plain or factored (:class:`~supergcn.train.inputs.LabelledInput`).
            ops: the rank's aggregations.

        Returns:
            n x ``out_dim`` float32 rows.
        """
        z = ops.timed("dense", self._project, x)
        source_score = ops.timed("dense", self._score, z, self.att_src)
        destination_score = ops.timed("dense", self._score, z, self.att_dst)
        out = ops.attention(z, source_score, destination_score, self.negative_slope, self.attention_dropout,
                            self.training)
        return ops.timed("elementwise", self._combine_heads, out)

    def _project(self, x: torch.Tensor | LabelledInput) -> torch.Tensor:
        return project(x, self.lin.weight, self.dense_dtype).view(-1, self.heads, self.width)

    @staticmethod
    def _score(z: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
        return (z * attention).sum(-1)

    def _combine_heads(self, out: torch.Tensor) -> torch.Tensor:
        return (out.reshape(len(out), -1) if self.concat else out.mean(1)) + self.bias


class GNN(nn.Module):
    """A stack of ``num_layers`` SAGE, GCN, GIN or GAT layers with the upstream hidden-layer order.

    ``label_propagation`` adds masked label propagation (UniMP, PyG's ``MaskLabel``): a
    learned embedding of the label, ``E[y_v]`` (one row of width ``in_dim`` per class), is
    added to the input features of the nodes passed as ``label_nodes``. ``input_norm``
    applies LayerNorm to the input (after the label embedding) before the first layer, so
    that, as in the paper's §6.1, every layer's input is normalised (the hidden layers'
    LayerNorm already precedes the next layer). The first layer takes this input factored
    (:class:`~supergcn.train.inputs.LabelledInput`): the sum and the norm are written out
    only in the cases :mod:`supergcn.train.inputs` names.

    Args:
        model: ``sage``, ``gcn``, ``gin`` or ``gat`` (:data:`supergcn.naming.GNN_MODELS`).
        in_dim: input features.
        hidden: hidden width.
        out_dim: classes.
        num_layers: graph convolutions; all but the last are followed by dropout,
            LayerNorm (``layer_norm``) and ReLU.
        dropout: dropout probability after each hidden convolution.
        dense_dtype: ``float32`` or ``bfloat16``, the type the linear layers' GEMMs run in
            (:func:`~supergcn.train.inputs.linear`); aggregation, normalisation and parameters stay float32.
        aggregate_first: aggregate before the linear layer in every layer (upstream), not
            only where the output is at least as wide as the input (GAT: not applicable).
        heads: GAT's attention heads (the training option's default, as the CLI's).
        attention_dropout: GAT's dropout on the attention coefficients.

    ``forward(x, ops, label_nodes, labels)`` returns the n x out_dim log-probabilities of
    the rank's rows; ``ops`` is the rank's :class:`GraphOps`. Every step is booked to a
    phase of the rank's timer (:mod:`supergcn.distributed.timing`): the linear layers to
    ``dense``, aggregations to ``aggregation``, the rest to ``elementwise``.

    Raises:
        ValueError: an unknown ``model`` or ``dense_dtype``, or GAT heads that do not divide ``hidden``.
    """

    def __init__(self, model: str, in_dim: int, hidden: int, out_dim: int, num_layers: int = 3,
                 dropout: float = 0.5, layer_norm: bool = True, label_propagation: bool = False,
                 input_norm: bool = False, dense_dtype: str = "float32", aggregate_first: bool = False,
                 heads: int = default("heads"), attention_dropout: float = 0.0) -> None:
        super().__init__()
        if model not in GNN_MODELS:
            raise ValueError(f"unknown model {model!r}: choose one of {GNN_MODELS}")
        dims = [in_dim] + [hidden] * (num_layers - 1) + [out_dim]
        if dense_dtype not in DENSE_DTYPES:
            raise ValueError(f"unknown dense dtype {dense_dtype!r}: choose one of {DENSE_DTYPES}")
        dtype = getattr(torch, dense_dtype)

        def layer(a: int, b: int, last: bool) -> nn.Module:
            if model == "gat":
                return GATLayer(a, b, heads, not last, dtype, attention_dropout)
            return {"sage": SAGELayer, "gcn": GCNLayer, "gin": GINLayer}[model](a, b, dtype, aggregate_first)
        self.convs = nn.ModuleList(layer(a, b, i == num_layers - 1)
                                   for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])))
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
