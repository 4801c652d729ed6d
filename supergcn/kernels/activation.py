"""A hidden layer's dropout -> LayerNorm -> ReLU as one numba kernel, forward and backward.

For a row x (width H), dropout rate p and LayerNorm weight γ, bias β:

    z = m ⊙ x / (1 - p),   m_f ~ Bernoulli(1 - p)
    x̂ = (z - μ) ρ,         μ = mean(z),  ρ = 1 / sqrt(var(z) + ε)   (biased variance)
    y = relu(γ ⊙ x̂ + β)

and, with g = dL/dy and g' = g ⊙ [γ ⊙ x̂ + β > 0],

    dL/dγ = Σ_rows g' ⊙ x̂,   dL/dβ = Σ_rows g',
    dL/dz = ρ (g'γ - mean(g'γ) - x̂ mean(g'γ ⊙ x̂)),   dL/dx = m ⊙ dL/dz / (1 - p)

(torch's LayerNorm backward). Without LayerNorm the layer is y = relu(z).

The rows may be bfloat16 (a bf16 GEMM's product), with a float32 bias b still to add: the
kernel then reads x + b, widened and summed in float32 as it reads each row (the bits of
:func:`~supergcn.kernels.widening.widening_add`'s sum, which is never written), keeps the
product itself for backward (x̂ recomputed exactly), writes the product's gradient rounded
to bfloat16 and sums the bias's (dL/db = Σ_rows dL/dx) in chunks like dL/dβ's.

Why one kernel: torch runs these as five passes over an N x H tensor forward and more
backward, and its CPU ``bernoulli_`` draws the mask at about 90 M values/s (0.5 s per
hidden layer on the arxiv shape, measured on 2 threads) — the three together cost more
than an aggregation. Here each row of x is read once forward (its output row, in cache,
twice more for the statistics) and the mask is never stored between the passes: m_f is
a counter-based hash (SplitMix64's finaliser) of (seed, row × H + f), recomputed once in
backward from the same seed (a row's mask and x̂ are kept in two scratch rows while that
row is done). The seed
is drawn from torch's generator, so runs are reproducible, checkpoints restore the
stream, and the mask does not depend on the thread count.

Bits: a row's sums (μ, var, and backward's two means) are taken in the fixed order of
:mod:`supergcn.kernels.ordered`, the parameter gradients row by row within chunks of
``ROWS_PER_CHUNK`` rows, and the kernels carry no fast-math flag (no reassociation, no
fused multiply-add, no approximate reciprocal or square root, NaN kept), so a result has
the same bits whatever the threads and whatever CPU the kernels were compiled for.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.autograd.function import once_differentiable

from supergcn.kernels.bfloat16 import as_float32, kernel_array, rounded
from supergcn.kernels.jit import njit, numba, prange
from supergcn.kernels.ordered import ordered_dot, ordered_squares, ordered_sum
from supergcn.kernels.simd import prefer_wide_vectors

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_HALF_SHIFT = np.uint64(32)
#: The LayerNorm parameter gradients are summed over chunks of this many rows (float64), then
#: over chunks: fixed chunks make the sums independent of the thread count.
ROWS_PER_CHUNK = 1024


@njit(inline="always")
def _kept(seed, index, threshold):
    """Whether element ``index`` survives: the top 32 bits of a SplitMix64 hash >= threshold."""
    z = seed + np.uint64(index) * _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    z = z ^ (z >> np.uint64(31))
    return (z >> _HALF_SHIFT) >= threshold


@njit(parallel=True, cache=True, nogil=True)
def _forward(x, row_bias, gamma, beta, out, mean, rstd, seed, threshold, scale, drop, normalize, eps, rounded_out,
             rounded_x, survived):
    num_rows, width = x.shape
    rounding = len(rounded_out) > 0
    keeping_x = len(rounded_x) > 0
    biased = len(row_bias) > 0
    for r in prange(num_rows):
        prefer_wide_vectors()
        row = x[r]
        thread = numba.get_thread_id()
        # Rounding, ``out`` is one scratch row per thread: the float32 rows are not kept.
        y = out[thread] if rounding else out[r]
        # Short loops over few arrays each, so that LLVM vectorises every one.
        if drop:
            kept = survived[thread]
            base = r * width
            for f in range(width):
                kept[f] = _kept(seed, base + f, threshold)
            # a dropped value is 0, but NaN stays NaN (as torch's x * mask)
            if biased:
                for f in range(width):
                    value = as_float32(row[f]) + row_bias[f]
                    y[f] = value * scale if kept[f] else value * np.float32(0.0)
            else:
                for f in range(width):
                    value = as_float32(row[f])
                    y[f] = value * scale if kept[f] else value * np.float32(0.0)
        elif biased:
            for f in range(width):
                y[f] = (as_float32(row[f]) + row_bias[f]) * scale
        else:
            for f in range(width):
                y[f] = as_float32(row[f]) * scale
        if normalize:
            mu = ordered_sum(y) / width
            squares = ordered_squares(y, mu)
            # Backward recomputes x̂ from the float32 statistics: use exactly those here.
            mean[r] = mu
            rstd[r] = 1.0 / np.sqrt(squares / width + eps)
            mu32 = mean[r]
            rho32 = rstd[r]
            for f in range(width):
                v = (y[f] - mu32) * rho32 * gamma[f] + beta[f]
                y[f] = 0.0 if v < 0.0 else v
        else:
            for f in range(width):
                y[f] = 0.0 if y[f] < 0.0 else y[f]
        if rounding:
            kept_out = rounded_out[r]
            for f in range(width):
                kept_out[f] = rounded(y[f])
        if keeping_x:
            kept_x = rounded_x[r]
            for f in range(width):
                kept_x[f] = rounded(as_float32(row[f]))


@njit(parallel=True, cache=True, nogil=True)
def _backward(x, row_bias, out, gamma, grad, mean, rstd, seed, threshold, scale, drop, normalize, chunks, grad_x,
              grad_gamma_parts, grad_beta_parts, grad_bias_parts, rounding):
    width = x.shape[1]
    biased = len(row_bias) > 0
    for c in prange(len(chunks) - 1):
        prefer_wide_vectors()
        grad_gamma = grad_gamma_parts[c]
        grad_beta = grad_beta_parts[c]
        grad_bias = grad_bias_parts[c]
        # A row's x̂ (for its ordered dot) and mask, kept so that the last pass neither
        # recomputes x̂ nor hashes again; and its input's gradient, in float32.
        normalized = np.empty(width if normalize else 0, np.float32)
        relu_grad = np.empty(width if normalize else 0, np.float32)
        survived = np.ones(width if normalize else 0, np.bool_)
        gz = np.empty(width, np.float32)
        for r in range(chunks[c], chunks[c + 1]):
            row = x[r]
            y = out[r]
            g = grad[r]
            gx = grad_x[r]
            base = r * width
            if not normalize:
                for f in range(width):
                    kept = not drop or _kept(seed, base + f, threshold)
                    gz[f] = as_float32(g[f]) * scale if kept and as_float32(y[f]) > 0.0 else 0.0
                _store_gradient(gz, gx, grad_bias, biased, rounding)
                continue
            mu = mean[r]
            rho = rstd[r]
            # Short loops over few arrays each, so that LLVM vectorises every one.
            if drop:
                for f in range(width):
                    survived[f] = _kept(seed, base + f, threshold)
            if biased:  # the sum the forward read, recomputed exactly
                for f in range(width):
                    value = as_float32(row[f]) + row_bias[f]
                    z = value * scale if survived[f] else value * np.float32(0.0)
                    normalized[f] = (z - mu) * rho
            else:
                for f in range(width):
                    value = as_float32(row[f])
                    z = value * scale if survived[f] else value * np.float32(0.0)
                    normalized[f] = (z - mu) * rho
            for f in range(width):
                relu_grad[f] = as_float32(g[f]) if as_float32(y[f]) > 0.0 else np.float32(0.0)  # ReLU's gate
            for f in range(width):
                grad_gamma[f] += relu_grad[f] * normalized[f]
                grad_beta[f] += relu_grad[f]
            for f in range(width):
                relu_grad[f] = relu_grad[f] * gamma[f]
            mean_g = ordered_sum(relu_grad) / width
            mean_gx = ordered_dot(relu_grad, normalized) / width
            for f in range(width):
                gz[f] = rho * (relu_grad[f] - mean_g - normalized[f] * mean_gx) * scale if survived[f] else 0.0
            _store_gradient(gz, gx, grad_bias, biased, rounding)


@njit(inline="always")
def _store_gradient(gz, gx, grad_bias, biased, rounding):
    """A row's input gradient ``gz`` into ``gx`` (rounded where it holds bfloat16), and
    added to the bias's partial sums where the input had a bias."""
    if biased:
        for f in range(len(gz)):
            grad_bias[f] += gz[f]
    if rounding:
        for f in range(len(gz)):
            gx[f] = rounded(gz[f])
    else:
        for f in range(len(gz)):
            gx[f] = gz[f]


def _mask_parameters(p: float, training: bool) -> tuple[bool, np.uint64, float]:
    """(drop?, threshold on the hash's top 32 bits, scale of kept values)."""
    if not training or p == 0.0:
        return False, np.uint64(0), 1.0
    if p >= 1.0:
        return False, np.uint64(0), 0.0
    return True, np.uint64(round(p * 2**32)), 1.0 / (1.0 - p)


def _mask_rows(drop: bool, width: int) -> np.ndarray:
    """The forward's scratch for a row's mask: one row per thread (none without dropout)."""
    return np.empty((numba.config.NUMBA_NUM_THREADS, width) if drop else (0, 0), np.bool_)


#: No rounded copies: a (0 x 0) array of bfloat16 bits.
_NOT_ROUNDED = np.empty((0, 0), np.uint16)
#: No bias row.
_NO_BIAS = np.empty(0, np.float32)


class _DropoutNormReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, p, training, eps, seed, bfloat16, row_bias):
        x = x.contiguous()
        ctx.input_dtype = x.dtype  # the gradient's: bfloat16 rows get a bfloat16 gradient
        normalize = weight is not None
        drop, threshold, scale = _mask_parameters(p, training)
        gamma = weight.detach().numpy() if normalize else np.empty(0, np.float32)
        beta = bias.detach().numpy() if normalize else np.empty(0, np.float32)
        shift = _NO_BIAS if row_bias is None else row_bias.detach().contiguous().numpy()
        out = torch.empty((numba.config.NUMBA_NUM_THREADS, x.shape[1]) if bfloat16 else x.shape)
        mean = np.empty(x.shape[0] if normalize else 0, np.float32)
        rstd = np.empty_like(mean)
        rounded_out = torch.empty_like(x, dtype=torch.bfloat16) if bfloat16 else None
        # float32 rows rounded for backward; bfloat16 ones are kept as they are.
        rounded_x = torch.empty_like(x, dtype=torch.bfloat16) if bfloat16 and x.dtype == torch.float32 else None
        _forward(kernel_array(x.detach()), shift, gamma, beta, out.numpy(), mean, rstd, np.uint64(seed), threshold,
                 np.float32(scale), drop, normalize, np.float32(eps),
                 *(_NOT_ROUNDED if kept is None else kernel_array(kept) for kept in (rounded_out, rounded_x)),
                 _mask_rows(drop, x.shape[1]))
        if bfloat16:  # only bfloat16 rows outlive the call: half the bytes kept for backward
            x, out = x if rounded_x is None else rounded_x, rounded_out
        # The output is saved too (the next layer keeps it anyway): ReLU's gate in backward.
        ctx.save_for_backward(x, out)
        ctx.state = (shift, gamma, mean, rstd, np.uint64(seed), threshold, np.float32(scale), drop, normalize)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        x, out = (t.detach() for t in ctx.saved_tensors)
        shift, gamma, mean, rstd, seed, threshold, scale, drop, normalize = ctx.state
        num_rows, width = x.shape
        chunks = np.append(np.arange(0, num_rows, ROWS_PER_CHUNK, dtype=np.int64), num_rows)
        grad_x = torch.empty(x.shape, dtype=ctx.input_dtype)
        parts = np.zeros((2, len(chunks) - 1, width if normalize else 0), np.float64)
        bias_parts = np.zeros((len(chunks) - 1, len(shift)), np.float64)
        _backward(kernel_array(x), shift, kernel_array(out), gamma, kernel_array(grad.to(out.dtype).contiguous()),
                  mean, rstd, seed, threshold, scale, drop, normalize, chunks, kernel_array(grad_x), parts[0],
                  parts[1], bias_parts, grad_x.dtype == torch.bfloat16)
        grad_shift = None if not len(shift) else torch.from_numpy(bias_parts.sum(axis=0).astype(np.float32))
        if not normalize:
            return grad_x, None, None, None, None, None, None, None, grad_shift
        grad_gamma, grad_beta = (torch.from_numpy(part.sum(axis=0).astype(np.float32)) for part in parts)
        return grad_x, grad_gamma, grad_beta, None, None, None, None, None, grad_shift


def dropout_norm_relu(x: torch.Tensor, norm: torch.nn.LayerNorm | None, p: float, training: bool,
                      seed: int = 0, bfloat16: bool = False, row_bias: torch.Tensor | None = None) -> torch.Tensor:
    """``relu(norm(dropout(x + row_bias, p)))`` (``norm`` None: no normalisation; no
    ``row_bias``: none added) of float32 rows, or of bfloat16 rows (a GEMM's product) with
    the bias they have still to add, if any (``x + row_bias`` then taken in float32 as it is read: the bits of
    :func:`~supergcn.kernels.widening.widening_add`'s sum, without writing it).

    ``seed`` picks the dropout mask (ignored unless ``training`` and 0 < p < 1); the same
    seed gives the same mask at any thread count. With ``bfloat16`` the result is the
    float32 result rounded to bfloat16 (nearest, ties to even), and what backward keeps is
    bfloat16 too: float32 input rounded likewise (x̂ is recomputed from it with the float32
    statistics of the exact input), bfloat16 input as it is (with the bias: x̂ recomputed
    exactly), and the output (ReLU's gate). The gradient is read as bfloat16 where the
    output is, and the input's gradient has the input's type (bfloat16: rounded once);
    ``row_bias``'s is the column sums of the float32 gradient of ``x + row_bias``, summed in
    fixed chunks of rows as LayerNorm's parameter gradients are.

    Args:
        x: n x H float32 or bfloat16 rows.
        norm: the LayerNorm (its ``eps``, and its affine parameters if any), or None.
        p: the dropout probability.
        training: whether dropout applies.
        seed: the mask's seed.
        bfloat16: store the result (and what backward keeps) in bfloat16.
        row_bias: H float32 values added to every row first, or None; with bfloat16 rows only.

    Returns:
        The n x H rows, float32 or (``bfloat16``) bfloat16.

    Raises:
        ValueError: rows that are not 2-D float32 or bfloat16, or a bias that is not H
            float32 values beside bfloat16 rows.
    """
    if x.dim() != 2 or x.dtype not in (torch.float32, torch.bfloat16):
        raise ValueError(f"dropout_norm_relu takes 2-D float32 or bfloat16 rows, not {x.dtype} of shape "
                         f"{tuple(x.shape)}")
    low = x.dtype == torch.bfloat16
    if row_bias is not None and not (low and row_bias.dtype == torch.float32 and row_bias.shape == x.shape[1:]):
        raise ValueError(f"dropout_norm_relu adds a bias of {x.shape[1]} float32 values to bfloat16 rows only, not "
                         f"{row_bias.dtype} of shape {tuple(row_bias.shape)} to {x.dtype} rows")
    if norm is None:
        weight, bias, eps = None, None, 0.0
    elif norm.weight is None:  # LayerNorm without affine parameters
        weight, bias, eps = torch.ones(x.shape[1]), torch.zeros(x.shape[1]), norm.eps
    else:
        weight, bias, eps = norm.weight, norm.bias, norm.eps
    return _DropoutNormReLU.apply(x, weight, bias, float(p), bool(training), float(eps), int(seed), bool(bfloat16),
                                  row_bias)


def dropout_mask(seed: int, shape: tuple[int, int], p: float) -> np.ndarray:
    """The keep mask :func:`dropout_norm_relu` applies with this seed (for tests and checks)."""
    drop, threshold, scale = _mask_parameters(p, True)
    ones = np.ones(shape, np.float32)
    kept = np.empty_like(ones)
    _forward(ones, _NO_BIAS, np.empty(0, np.float32), np.empty(0, np.float32), kept, np.empty(0, np.float32),
             np.empty(0, np.float32), np.uint64(seed), threshold, np.float32(scale), drop, False, np.float32(0),
             _NOT_ROUNDED, _NOT_ROUNDED, _mask_rows(drop, shape[1]))
    return kept > 0
