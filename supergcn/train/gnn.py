"""The GNNs trained here: a stack of one model's layers (:mod:`supergcn.models`) with the
upstream hidden-layer order.

Hidden layers run conv -> dropout -> LayerNorm -> ReLU (the upstream order), fused in one
kernel (:mod:`supergcn.kernels.activation`); the last layer's output goes through
log_softmax. Because aggregation is linear, a layer whose output is narrower than its
input transforms first and aggregates the narrower rows, which exchanges fewer bytes and
gives the same result up to float rounding (each model's card states its rule,
:meth:`~supergcn.models.card.ModelCard.layer_transforms_first`); ``aggregate_first``
always aggregates first where the model allows it, as upstream SuperGCN does (so its
exchanges carry input-width rows: the paper's Table 5 volumes).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from supergcn.distributed.timing import phase
from supergcn.kernels.activation import dropout_norm_relu
from supergcn.models.inputs import BiasedProduct, InputNorm, LabelledInput
from supergcn.models.layers import layer_module
from supergcn.models.ops import Ops
from supergcn.naming import DENSE_DTYPES
from supergcn.train.config import default


class GNN(nn.Module):
    """A stack of ``num_layers`` layers of one model (:mod:`supergcn.models`) with the upstream hidden-layer order.

    ``label_propagation`` adds masked label propagation (UniMP, PyG's ``MaskLabel``): a
    learned embedding of the label, ``E[y_v]`` (one row of width ``in_dim`` per class), is
    added to the input features of the nodes passed as ``label_nodes``. ``input_norm``
    applies LayerNorm to the input (after the label embedding) before the first layer, so
    that, as in the paper's §6.1, every layer's input is normalised (the hidden layers'
    LayerNorm already precedes the next layer). The first layer takes this input factored
    (:class:`~supergcn.models.inputs.LabelledInput`): the sum and the norm are written out
    only in the cases :mod:`supergcn.models.inputs` names.

    Args:
        model: one of :data:`supergcn.naming.GNN_MODELS`.
        in_dim: input features.
        hidden: hidden width.
        out_dim: classes.
        num_layers: graph convolutions; all but the last are followed by dropout,
            LayerNorm (``layer_norm``) and ReLU.
        dropout: dropout probability after each hidden convolution.
        dense_dtype: ``float32`` or ``bfloat16``, the type the linear layers' GEMMs run in
            (:func:`~supergcn.models.inputs.linear`); aggregation, normalisation and parameters stay float32.
        row_dtype: ``float32`` or ``bfloat16``, the type the hidden layers' activations are
            stored in, and so read by the next layer's aggregation and GEMM (a bf16 run's,
            :mod:`supergcn.train.precision`; its features come in bfloat16 too).
        aggregate_first: aggregate before the linear layer in every layer (upstream), not
            only where the model's width rule says so (where the model allows it).
        first_aggregates_first: the first layer aggregates before its linear layer (where
            its aggregation of the input is precomputed, :class:`~supergcn.distributed.graph_ops.GraphOps`).
        heads: attention heads, for the models that read them (the training option's default, as the CLI's).
        attention_dropout: dropout on the attention coefficients, for the models that read it.

    ``forward(x, ops, label_nodes, labels)`` returns the log-probabilities of the last
    layer's destinations; ``ops`` is what the layers aggregate with
    (:class:`~supergcn.models.ops.Ops`): the rank's :class:`~supergcn.distributed.graph_ops.GraphOps`
    for every layer, or one per layer (a mini-batch's blocks, whose destinations are the
    next layer's sources). ``train()`` and ``eval()`` are the one switch between a training
    pass (quantized, a method's exchanges where configured) and an evaluation pass:
    ``forward`` begins the pass on the first layer's ``ops`` accordingly. Every step
    is booked to a phase of the rank's timer (:mod:`supergcn.distributed.timing`): the
    linear layers to ``dense``, aggregations to ``aggregation``, the rest to ``elementwise``.

    Raises:
        ValueError: an unknown ``model`` or ``dense_dtype``, or GAT heads that do not divide ``hidden``.
    """

    def __init__(self, model: str, in_dim: int, hidden: int, out_dim: int, num_layers: int = 3,
                 dropout: float = 0.5, layer_norm: bool = True, label_propagation: bool = False,
                 input_norm: bool = False, dense_dtype: str = "float32", aggregate_first: bool = False,
                 heads: int = default("heads"), attention_dropout: float = 0.0,
                 first_aggregates_first: bool = False, row_dtype: str = "float32") -> None:
        super().__init__()
        layer = layer_module(model).Layer
        self.model = model
        dims = [in_dim] + [hidden] * (num_layers - 1) + [out_dim]
        for name, value in (("dense", dense_dtype), ("row", row_dtype)):
            if value not in DENSE_DTYPES:
                raise ValueError(f"unknown {name} dtype {value!r}: choose one of {DENSE_DTYPES}")
        self.row_dtype = getattr(torch, row_dtype)
        dtype = getattr(torch, dense_dtype)
        self.convs = nn.ModuleList(layer(a, b, last=i == num_layers - 1, dense_dtype=dtype,
                                         aggregate_first=aggregate_first or (i == 0 and first_aggregates_first),
                                         heads=heads,
                                         attention_dropout=attention_dropout)
                                   for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])))
        self.norms = nn.ModuleList(nn.LayerNorm(hidden) if layer_norm else nn.Identity()
                                   for _ in range(num_layers - 1))
        self.label_embedding = nn.Embedding(out_dim, in_dim) if label_propagation else None
        self.input_norm = InputNorm(in_dim) if input_norm else None
        self.dropout = dropout

    def forward(self, x: torch.Tensor, ops: Ops | Sequence[Ops], label_nodes: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> torch.Tensor:
        """The log-probabilities of the last layer's destinations (class docstring).

        Args:
            x: the n x ``in_dim`` input features of the first layer's sources.
            ops: the aggregations, of every layer or one per layer.
            label_nodes: the nodes whose labels are fed as inputs (label propagation only).
            labels: their labels, in the order of ``label_nodes``.

        Returns:
            A row of ``out_dim`` log-probabilities per destination of the last layer.
        """
        layers = list(ops) if isinstance(ops, Sequence) else [ops] * len(self.convs)
        layers[0].begin_pass(self.training)
        x = LabelledInput(layers[0].layer_input(x), self.input_norm, self.label_embedding, label_nodes, labels)
        for layer, (conv, layer_ops) in enumerate(zip(self.convs, layers)):
            if layer > 0:
                rows, bias = (x.product, x.bias) if isinstance(x, BiasedProduct) else (x, None)
                x = layer_ops.layer_input(activate(rows, self.norms[layer - 1], self.dropout, self.training,
                                                   self.row_dtype, bias))
            x = conv(x, layer_ops)
        return _log_softmax(x, -1)


@phase("elementwise")
def activate(x: torch.Tensor, norm: nn.Module, dropout: float, training: bool,
             dtype: torch.dtype = torch.float32, bias: torch.Tensor | None = None) -> torch.Tensor:
    """A hidden layer's output through dropout, LayerNorm (``norm``, or none) and ReLU, fused
    (:func:`~supergcn.kernels.activation.dropout_norm_relu`), the dropout mask drawn from the
    rank's torch stream; stored in ``dtype``.

    Args:
        x: n x hidden rows.
        norm: the layer's ``nn.LayerNorm``, or ``nn.Identity`` for none.
        dropout: the dropout probability.
        training: whether dropout applies.
        dtype: what the result is stored in (bfloat16: rounded once, to nearest even, and
            kept for backward in bfloat16, :func:`~supergcn.kernels.activation.dropout_norm_relu`).
        bias: a bias the rows have still to add (a bfloat16 product's:
            :class:`~supergcn.models.inputs.BiasedProduct`), or None.

    Returns:
        n x hidden rows.
    """
    drawing = training and 0 < dropout < 1
    seed = int(torch.randint(2**62, ()).item()) if drawing else 0  # from the rank's torch stream
    return dropout_norm_relu(x, norm if isinstance(norm, nn.LayerNorm) else None, dropout, training, seed,
                             bfloat16=dtype == torch.bfloat16, row_bias=bias)


_log_softmax = phase("elementwise")(F.log_softmax)
