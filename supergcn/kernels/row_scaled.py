"""GCN's row-scaled steps on bfloat16 rows, each in one pass forward and one backward.

A bf16 GCN layer scales its rows by ``d^{-1/2}`` before the gather and adds the self
loops' term after it (:mod:`supergcn.models.gcn`). Torch runs those as three to five
passes over the rows each way: broadcast multiplies into float32 temporaries, then a
narrowing copy. Here, for bfloat16 rows x, a float32 factor per row s, float32 rows a
and a float32 factor per row m (which rows lack a self loop: 0 or 1),

    scaled_rows(x, s)[r, f]              = bfloat16(float32(x[r, f]) * s[r])
    self_loops_added(a, x, m, s)[r, f]   = a[r, f] + (m[r] * float32(x[r, f])) * s[r]

each operation rounded in float32 in the order written, as torch evaluates
``(x * s[:, None]).to(torch.bfloat16)`` and ``a + m[:, None] * x * s[:, None]``, and the
gradients are autograd's for those expressions, in the same order:

    d scaled_rows / dx            = bfloat16(float32(g[r, f]) * s[r])
    d self_loops_added / da       = g
    d self_loops_added / dx       = bfloat16((g[r, f] * s[r]) * m[r])

(the factors take no gradient: GCN's are degrees). The bits are torch's but for a NaN's
(:mod:`supergcn.kernels.rounding`). No sum, so nothing to order: the same bits on every CPU.
"""

from __future__ import annotations

import torch

from supergcn.kernels.bfloat16 import as_float32, kernel_array, rounded
from supergcn.kernels.jit import njit, prange
from supergcn.kernels.rounding import scaled_rounded
from supergcn.kernels.simd import prefer_wide_vectors


@njit(parallel=True, cache=True, nogil=True)
def _self_loops_added(aggregated, rows, missing, scale, out):
    for r in prange(out.shape[0]):
        prefer_wide_vectors()
        base, row, written = aggregated[r], rows[r], out[r]
        loop, factor = missing[r], scale[r]
        for f in range(out.shape[1]):
            written[f] = base[f] + (loop * as_float32(row[f])) * factor


@njit(parallel=True, cache=True, nogil=True)
def _self_loops_gradient(grad, missing, scale, out):
    for r in prange(out.shape[0]):
        prefer_wide_vectors()
        row, written = grad[r], out[r]
        loop, factor = missing[r], scale[r]
        for f in range(out.shape[1]):
            written[f] = rounded((as_float32(row[f]) * factor) * loop)


class _ScaledRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, rows, scale):
        ctx.scale = scale
        return scaled_rounded(rows, scale)

    @staticmethod
    def backward(ctx, grad):
        return scaled_rounded(grad, ctx.scale), None


class _SelfLoopsAdded(torch.autograd.Function):
    @staticmethod
    def forward(ctx, aggregated, rows, missing, scale):
        ctx.missing, ctx.scale = missing, scale
        out = torch.empty(aggregated.shape, dtype=torch.float32)
        _self_loops_added(aggregated.detach().contiguous().numpy(), kernel_array(rows.detach().contiguous()),
                          missing.numpy(), scale.numpy(), out.numpy())
        return out

    @staticmethod
    def backward(ctx, grad):
        grad_rows = torch.empty(grad.shape, dtype=torch.bfloat16)
        _self_loops_gradient(kernel_array(grad.contiguous()), ctx.missing.numpy(), ctx.scale.numpy(),
                             kernel_array(grad_rows))
        return grad, grad_rows, None, None


def _check(rows: torch.Tensor, factors: tuple[torch.Tensor, ...], what: str) -> None:
    if rows.dim() != 2 or rows.dtype != torch.bfloat16:
        raise ValueError(f"{what} takes 2-D bfloat16 rows, not {rows.dtype} of shape {tuple(rows.shape)}")
    for factor in factors:
        if factor.dtype != torch.float32 or factor.shape != (rows.shape[0],) or factor.requires_grad:
            raise ValueError(f"{what} takes one float32 factor per row ({rows.shape[0]}) without a gradient, not "
                             f"{factor.dtype} of shape {tuple(factor.shape)}")


def scaled_rows(rows: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``(rows * scale[:, None]).to(torch.bfloat16)`` of bfloat16 rows, differentiable in
    ``rows`` (module docstring).

    Args:
        rows: 2-D bfloat16 rows.
        scale: a float32 factor per row (no gradient).

    Returns:
        The scaled bfloat16 rows.

    Raises:
        ValueError: on rows that are not 2-D bfloat16 or factors that are not one float32 per row.
    """
    _check(rows, (scale,), "scaled_rows")
    return _ScaledRows.apply(rows, scale.contiguous())


def self_loops_added(aggregated: torch.Tensor, rows: torch.Tensor, missing: torch.Tensor,
                     scale: torch.Tensor) -> torch.Tensor:
    """``aggregated + missing[:, None] * rows * scale[:, None]`` in float32, ``rows``
    bfloat16, differentiable in ``aggregated`` and ``rows`` (module docstring).

    Args:
        aggregated: 2-D float32 rows.
        rows: bfloat16 rows of the same shape.
        missing: a float32 factor per row (GCN: 1 where a row lacks a self loop, else 0).
        scale: a float32 factor per row.

    Returns:
        The float32 sum.

    Raises:
        ValueError: on rows of other dtypes or shapes, or factors that are not one float32 per row.
    """
    _check(rows, (missing, scale), "self_loops_added")
    if aggregated.dtype != torch.float32 or aggregated.shape != rows.shape:
        raise ValueError(f"self_loops_added adds to float32 rows of shape {tuple(rows.shape)}, not "
                         f"{aggregated.dtype} of shape {tuple(aggregated.shape)}")
    return _SelfLoopsAdded.apply(aggregated, rows, missing.contiguous(), scale.contiguous())
