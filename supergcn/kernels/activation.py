"""A hidden layer's dropout -> LayerNorm -> ReLU as one numba kernel, forward and backward.

For a row x (width H), dropout rate p and LayerNorm weight γ, bias β:

    z = m ⊙ x / (1 - p),   m_f ~ Bernoulli(1 - p)
    x̂ = (z - μ) ρ,         μ = mean(z),  ρ = 1 / sqrt(var(z) + ε)   (biased variance)
    y = relu(γ ⊙ x̂ + β)

and, with g = dL/dy and g' = g ⊙ [γ ⊙ x̂ + β > 0],

    dL/dγ = Σ_rows g' ⊙ x̂,   dL/dβ = Σ_rows g',
    dL/dz = ρ (g'γ - mean(g'γ) - x̂ mean(g'γ ⊙ x̂)),   dL/dx = m ⊙ dL/dz / (1 - p)

(torch's LayerNorm backward). Without LayerNorm the layer is y = relu(z).

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
def _forward(x, gamma, beta, out, mean, rstd, seed, threshold, scale, drop, normalize, eps, rounded_out, rounded_x,
             survived):
    num_rows, width = x.shape
    rounding = len(rounded_out) > 0
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
            for f in range(width):
                # a dropped value is 0, but NaN stays NaN (as torch's x * mask)
                y[f] = row[f] * scale if kept[f] else row[f] * np.float32(0.0)
        else:
            for f in range(width):
                y[f] = row[f] * scale
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
            kept_out, kept_x = rounded_out[r], rounded_x[r]
            for f in range(width):
                kept_out[f] = rounded(y[f])
            for f in range(width):
                kept_x[f] = rounded(row[f])


@njit(parallel=True, cache=True, nogil=True)
def _backward(x, out, gamma, grad, mean, rstd, seed, threshold, scale, drop, normalize, chunks, grad_x,
              grad_gamma_parts, grad_beta_parts):
    width = x.shape[1]
    for c in prange(len(chunks) - 1):
        prefer_wide_vectors()
        grad_gamma = grad_gamma_parts[c]
        grad_beta = grad_beta_parts[c]
        # A row's x̂ (for its ordered dot) and mask, kept so that the last pass neither
        # recomputes x̂ nor hashes again.
        normalized = np.empty(width if normalize else 0, grad_x.dtype)
        relu_grad = np.empty(width if normalize else 0, grad_x.dtype)
        survived = np.ones(width if normalize else 0, np.bool_)
        for r in range(chunks[c], chunks[c + 1]):
            row = x[r]
            y = out[r]
            g = grad[r]
            gx = grad_x[r]
            base = r * width
            if not normalize:
                for f in range(width):
                    kept = not drop or _kept(seed, base + f, threshold)
                    gx[f] = as_float32(g[f]) * scale if kept and as_float32(y[f]) > 0.0 else 0.0
                continue
            mu = mean[r]
            rho = rstd[r]
            # Short loops over few arrays each, so that LLVM vectorises every one.
            if drop:
                for f in range(width):
                    survived[f] = _kept(seed, base + f, threshold)
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
                gx[f] = rho * (relu_grad[f] - mean_g - normalized[f] * mean_gx) * scale if survived[f] else 0.0


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


class _DropoutNormReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, p, training, eps, seed, bfloat16):
        x = x.contiguous()
        normalize = weight is not None
        drop, threshold, scale = _mask_parameters(p, training)
        gamma = weight.detach().numpy() if normalize else np.empty(0, np.float32)
        beta = bias.detach().numpy() if normalize else np.empty(0, np.float32)
        out = torch.empty((numba.config.NUMBA_NUM_THREADS, x.shape[1]) if bfloat16 else x.shape)
        mean = np.empty(x.shape[0] if normalize else 0, np.float32)
        rstd = np.empty_like(mean)
        rounded_out, rounded_x = ((torch.empty_like(x, dtype=torch.bfloat16) for _ in range(2)) if bfloat16
                                  else (None, None))
        _forward(x.detach().numpy(), gamma, beta, out.numpy(), mean, rstd, np.uint64(seed), threshold,
                 np.float32(scale), drop, normalize, np.float32(eps),
                 *((kernel_array(rounded_out), kernel_array(rounded_x)) if bfloat16 else (_NOT_ROUNDED, _NOT_ROUNDED)),
                 _mask_rows(drop, x.shape[1]))
        if bfloat16:  # only the rounded rows outlive the call: half the bytes kept for backward
            x, out = rounded_x, rounded_out
        # The output is saved too (the next layer keeps it anyway): ReLU's gate in backward.
        ctx.save_for_backward(x, out)
        ctx.state = (gamma, mean, rstd, np.uint64(seed), threshold, np.float32(scale), drop, normalize)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        x, out = (t.detach() for t in ctx.saved_tensors)
        gamma, mean, rstd, seed, threshold, scale, drop, normalize = ctx.state
        num_rows, width = x.shape
        chunks = np.append(np.arange(0, num_rows, ROWS_PER_CHUNK, dtype=np.int64), num_rows)
        grad_x = torch.empty(x.shape, dtype=torch.float32)
        parts = np.zeros((2, len(chunks) - 1, width if normalize else 0), np.float64)
        _backward(kernel_array(x), kernel_array(out), gamma, kernel_array(grad.to(out.dtype).contiguous()), mean, rstd,
                  seed, threshold, scale, drop, normalize, chunks, grad_x.numpy(), parts[0], parts[1])
        if not normalize:
            return grad_x, None, None, None, None, None, None, None
        grad_gamma, grad_beta = (torch.from_numpy(part.sum(axis=0).astype(np.float32)) for part in parts)
        return grad_x, grad_gamma, grad_beta, None, None, None, None, None


def dropout_norm_relu(x: torch.Tensor, norm: torch.nn.LayerNorm | None, p: float, training: bool,
                      seed: int = 0, bfloat16: bool = False) -> torch.Tensor:
    """``relu(norm(dropout(x, p)))`` (``norm`` None: no normalisation) of float32 rows.

    ``seed`` picks the dropout mask (ignored unless ``training`` and 0 < p < 1); the same
    seed gives the same mask at any thread count. With ``bfloat16`` the result is the
    float32 result rounded to bfloat16 (nearest, ties to even), and what backward keeps is
    bfloat16 too: the input rounded likewise (x̂ is recomputed from it with the float32
    statistics of the exact input) and the output (ReLU's gate); the gradient is read as
    bfloat16 and the input's gradient is float32.
    """
    if x.dtype != torch.float32 or x.dim() != 2:
        raise ValueError(f"dropout_norm_relu takes 2-D float32 rows, not {x.dtype} of shape {tuple(x.shape)}")
    if norm is None:
        weight, bias, eps = None, None, 0.0
    elif norm.weight is None:  # LayerNorm without affine parameters
        weight, bias, eps = torch.ones(x.shape[1]), torch.zeros(x.shape[1]), norm.eps
    else:
        weight, bias, eps = norm.weight, norm.bias, norm.eps
    return _DropoutNormReLU.apply(x, weight, bias, float(p), bool(training), float(eps), int(seed), bool(bfloat16))


def dropout_mask(seed: int, shape: tuple[int, int], p: float) -> np.ndarray:
    """The keep mask :func:`dropout_norm_relu` applies with this seed (for tests and checks)."""
    drop, threshold, scale = _mask_parameters(p, True)
    ones = np.ones(shape, np.float32)
    kept = np.empty_like(ones)
    _forward(ones, np.empty(0, np.float32), np.empty(0, np.float32), kept, np.empty(0, np.float32),
             np.empty(0, np.float32), np.uint64(seed), threshold, np.float32(scale), drop, False, np.float32(0),
             _NOT_ROUNDED, _NOT_ROUNDED, _mask_rows(drop, shape[1]))
    return kept > 0
