"""A layer's input as the layers consume it: projected (``X W^T``) or written out.

Hidden layers take their input as a tensor. The first layer's input under
masked label propagation and ``input_norm`` is

    X' = N(X + S E[y]),

with X the n x F features, S the n x k selection of the k label-input nodes, E the C x F
label embedding and N the input LayerNorm (or the identity). Written out, X' costs a copy
of X every epoch and, since it requires a gradient, an n x F input gradient in backward,
where the embedding's gradient needs the label rows only. :class:`LabelledInput` keeps
X' factored instead:

* without N, by linearity ``X' W^T = X W^T + S (E W^T)[y]``: the label part is computed
  at width C x out and added to the label rows of the product;
* with N = LayerNorm(gamma, beta), ``N(z) W^T = z_hat (W diag(gamma))^T + W beta`` with
  ``z_hat`` the row standardised without affine: the rows without a label are the constant
  ``X_hat``, computed once (:class:`InputNorm`), and only the k label rows are
  standardised (and differentiated) afresh.

A layer that aggregates its input before transforming it (input narrower than the
output, or ``aggregate_first``) has, without N and where the pass's aggregation is exact
(float32 and synchronous, :attr:`supergcn.models.ops.Ops.exact`),

    A(X') W^T = A(X) W^T + A(M) (E W^T),     M = S onehot(y) (n x C),

so the label part is aggregated at width C (the one-hot rows of the label inputs) and
the features' aggregation needs no gradient. None of these paths has a gradient with
respect to X, and each equals the written-out X' up to float rounding. Two cases write X' out
(:meth:`LabelledInput.dense`) and pay its n x F gradient:

* a training pass that is not exact (quantized rows, or a compared method's exchange that
  delays, samples or keeps rows stale) at a layer that aggregates first: the exchanged
  rows are such rows of X' itself, which is not linear in X', and the embedding's gradient
  must come back through the reverse exchange of every row, so that the bytes on the wire
  stay those of the written-out formulation;
* ``input_norm`` with a layer that aggregates first: the normalised label rows are not
  linear in E, so their aggregation would need rows of width F anyway.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from supergcn.distributed.timing import phase
from supergcn.kernels.rounding import rounded_rows
from supergcn.kernels.widening import widening_add


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
           dtype: torch.dtype = torch.float32, widen: bool = True) -> torch.Tensor:
    """``x W^T + b`` computed in ``dtype`` (float32, or bfloat16 for CPUs with bf16 GEMMs);
    the result is float32, unless the rows are bfloat16 (a bf16 run stores its rows so,
    :mod:`supergcn.train.precision`) or ``widen`` is false: then bfloat16, as the next
    step reads it (a term that :func:`project_onto` adds in float32 needs no widened
    copy). The parameters and their gradients are float32 either way."""
    if dtype == torch.float32:
        return F.linear(x, weight, bias)
    out = F.linear(rounded_rows(x) if x.dtype == torch.float32 else x.to(dtype), weight.to(dtype),
                   None if bias is None else bias.to(dtype))
    return out if x.dtype == torch.bfloat16 or not widen else out.float()


def project_onto(base: torch.Tensor | None, x: torch.Tensor, weight: torch.Tensor,
                 dtype: torch.dtype, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``base + x W^T (+ b)``, the sum fused into the float32 GEMM; in float32 from a
    bfloat16 GEMM's terms (:func:`~supergcn.kernels.widening.widening_add`)."""
    if base is None:
        return linear(x, weight, bias, dtype)
    if dtype == torch.float32:
        if bias is not None:
            base = base + bias
        return torch.addmm(base, x, weight.t())
    return widening_add(base, linear(x, weight, bias, dtype))


@dataclass(frozen=True)
class BiasedProduct:
    """A hidden layer's bfloat16 GEMM product with the float32 bias it has still to add,
    ``float32(product) + bias``: left to the activation, whose kernel adds it as it reads the
    rows (:func:`~supergcn.kernels.activation.dropout_norm_relu`, called by
    :func:`supergcn.train.gnn.activate`), where the sum written out would cost a float32
    pass forward and a rounding pass backward.

    Args:
        product: n x H bfloat16 rows.
        bias: H float32 values.
    """

    product: torch.Tensor
    bias: torch.Tensor


class InputNorm(nn.LayerNorm):
    """The input LayerNorm, ``N(z) = gamma * z_hat + beta``, which also gives ``z_hat``, the
    rows standardised without the affine map. The features' ``X_hat`` depends on no
    parameter: it is computed once and reused while the features are the same tensor,
    unchanged (the same object at the same version), so no epoch copies X for it."""

    def __init__(self, width: int) -> None:
        super().__init__(width)
        self._features: tuple[torch.Tensor, int, torch.Tensor] | None = None  # (X, its version, X_hat)

    def standardise(self, z: torch.Tensor) -> torch.Tensor:
        """``z_hat``: each row minus its mean, over its standard deviation (with ``eps``)."""
        return F.layer_norm(z, self.normalized_shape, None, None, self.eps)

    def standardised_features(self, x: torch.Tensor) -> torch.Tensor:
        """``X_hat`` of the features ``x`` (no gradient), from the cache where it holds."""
        cached = self._features
        if cached is None or cached[0] is not x or cached[1] != x._version:
            with torch.no_grad():
                cached = self._features = (x, x._version, self.standardise(x))
        return cached[2]


class LabelledInput:
    """The first layer's input ``N(X + S E[y])`` kept factored (see the module docstring).

    Args:
        x: the n x F features (no gradient).
        norm: the input LayerNorm (:class:`InputNorm`), or None.
        embedding: the label embedding E, or None for no label inputs.
        label_nodes, labels: the k rows that get a label embedding, and their labels.
    """

    def __init__(self, x: torch.Tensor, norm: InputNorm | None, embedding: nn.Embedding | None = None,
                 label_nodes: torch.Tensor | None = None, labels: torch.Tensor | None = None) -> None:
        self.x, self.norm = x, norm
        # Not "has label rows": a rank without any must still take the path (and run the
        # exchanges) of the ranks that have some.
        self.labelled = embedding is not None and label_nodes is not None
        self.embedding, self.label_nodes, self.labels = embedding, label_nodes, labels

    def dense(self) -> torch.Tensor:
        """X' written out (an n x F copy of X, differentiable where it depends on parameters)."""
        x = self.x
        if self.labelled:
            x = x.index_add(0, self.label_nodes, self.embedding(self.labels).to(x.dtype))
        return x if self.norm is None else self.norm(x)

    def label_indicator(self) -> torch.Tensor:
        """M = S onehot(y): the n x C one-hot labels of the label inputs, zero elsewhere."""
        indicator = self.x.new_zeros((len(self.x), self.embedding.num_embeddings))
        indicator[self.label_nodes, self.labels] = 1.0
        return indicator

    def project(self, weight: torch.Tensor, dtype: torch.dtype, base: torch.Tensor | None = None) -> torch.Tensor:
        """``base + X' W^T`` without writing X' out."""
        if self.norm is None:
            out = project_onto(base, self.x, weight, dtype)
            if self.labelled:
                # index_select, not [labels]: the labels repeat, and float32 indexing's backward adds
                # them with atomic adds in whatever order the threads take (bits differ run to run);
                # index_select's adds them in the index's order.
                label_part = linear(self.embedding.weight, weight, None, dtype).index_select(0, self.labels)
                out.index_add_(0, self.label_nodes, label_part.to(out.dtype))
            return out
        scaled = weight * self.norm.weight  # W diag(gamma)
        shift = weight @ self.norm.bias     # W beta
        out = project_onto(base, self.norm.standardised_features(self.x), scaled, dtype, shift)
        if self.labelled:
            label_base = None if base is None else base[self.label_nodes]
            out.index_copy_(0, self.label_nodes,
                            project_onto(label_base, self.standardised_label_rows, scaled, dtype, shift).to(out.dtype))
        return out

    @functools.cached_property
    def standardised_label_rows(self) -> torch.Tensor:
        """The label rows of X + S E[y] standardised (differentiable in E); cached because
        a SAGE layer projects its input twice (neighbour and self weights)."""
        return self.norm.standardise(self.x[self.label_nodes] + self.embedding(self.labels))


def aggregate_and_project(x: torch.Tensor | LabelledInput, ops, aggregate, weight: torch.Tensor,
                          bias: torch.Tensor | None, dtype: torch.dtype, widen: bool = True) -> torch.Tensor:
    """``aggregate(x) W^T + b`` of a layer's input; factored where ``aggregate`` (one of
    ``ops``' aggregations) is an exact linear map (``ops.exact``) and the input is labelled
    features without a norm. ``widen`` false leaves a bfloat16 GEMM's result in bfloat16
    (for a ``base`` of :func:`project`, which adds it in float32)."""
    if not (isinstance(x, LabelledInput) and x.labelled and x.norm is None and ops.exact):
        return affine(aggregate(write_out(x)), weight, bias, dtype, widen)
    out = affine(aggregate(x.x), weight, bias, dtype)
    label_part = affine(x.embedding.weight, weight, None, dtype)
    return add_product(out, aggregate(label_indicator(x)), label_part)


def project(x: torch.Tensor | LabelledInput, weight: torch.Tensor, dtype: torch.dtype,
            base: torch.Tensor | None = None) -> torch.Tensor:
    """``base + x W^T`` (``base`` optional) of a layer's input, factored or not."""
    if isinstance(x, LabelledInput):
        return x.project(weight, dtype, base)
    return project_onto(base, x, weight, dtype)


def plain_rows(x: torch.Tensor | LabelledInput) -> torch.Tensor | None:
    """A layer's input as one tensor where that costs nothing: the tensor itself, or the
    features of a first layer's input without label inputs or input norm; None for an
    input that is kept factored."""
    if not isinstance(x, LabelledInput):
        return x
    return x.x if not x.labelled and x.norm is None else None


class _ConcatenatedProduct(torch.autograd.Function):
    """``[a | b] W^T`` of bfloat16 blocks, as ``F.linear`` on their concatenation computes it
    (the same GEMMs, so the same bits), keeping ``a`` and ``b`` for backward instead of the
    concatenation: ``b``, the layer's input, is the activation's output, which the activation
    keeps anyway, so the concatenation is built again in backward rather than held from
    forward to backward."""

    @staticmethod
    def forward(ctx, a, b, weight):
        low = weight.to(torch.bfloat16)
        ctx.save_for_backward(a, b, low)
        return torch.mm(torch.cat([a, b], dim=1), low.t())

    @staticmethod
    def backward(ctx, grad):
        a, b, low = ctx.saved_tensors
        grad_weight = grad.t().mm(torch.cat([a, b], dim=1)).float()
        grad_a = grad_b = None
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            grad_rows = grad.mm(low)
            grad_a, grad_b = grad_rows[:, :a.shape[1]], grad_rows[:, a.shape[1]:]
        return grad_a, grad_b, grad_weight


def concatenated_product(a: torch.Tensor, b: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``[a | b] W^T``, one bfloat16 GEMM over two row blocks side by side, from the float32
    weight ``W``; float32 blocks are rounded to bfloat16 first as :func:`linear` rounds its
    input. The result is bfloat16; backward gives each block its gradient in bfloat16 and
    ``W`` its gradient in float32.

    Args:
        a, b: n x F_a and n x F_b rows, float32 or bfloat16.
        weight: out x (F_a + F_b) float32.

    Returns:
        n x out bfloat16 rows.
    """
    return _ConcatenatedProduct.apply(rounded_rows(a), rounded_rows(b), weight)


def written_out(x: torch.Tensor | LabelledInput) -> torch.Tensor:
    """A layer's input as one n x F tensor."""
    return x.dense() if isinstance(x, LabelledInput) else x


# The steps of the layers' formulas, each booked to its phase of the rank's timer
# (:func:`~supergcn.distributed.timing.phase`).
#: ``base + x W^T`` (:func:`project`).
projected = phase("dense")(project)
#: ``x W^T + b`` (:func:`linear`).
affine = phase("dense")(linear)
#: ``[a | b] W^T`` in bfloat16 (:func:`concatenated_product`).
concatenated = phase("dense")(concatenated_product)
#: ``float32(a) + float32(b)``, a bias or a root term added to a bfloat16 GEMM's product
#: (:func:`~supergcn.kernels.widening.widening_add`).
widened_sum = phase("dense")(widening_add)
#: ``a + b``, a bias or a root term.
add = phase("dense")(torch.add)
#: ``base + a b``.
add_product = phase("dense")(torch.addmm)
#: The layer's input as one tensor (:func:`written_out`).
write_out = phase("elementwise")(written_out)
#: The one-hot labels of the label inputs (:meth:`LabelledInput.label_indicator`).
label_indicator = phase("elementwise")(LabelledInput.label_indicator)
#: ReLU.
relu = phase("elementwise")(F.relu)
