"""Rows scaled and rounded to bfloat16 in one pass: the gradient a bf16 rank's transposed
gather reads.

For rows g (float32 or bfloat16) and a scale s per row (or none),

    out[r, f] = bfloat16(float32(g[r, f]) * s[r]),

the product rounded once in float32 and then to bfloat16, to nearest, ties to even
(:func:`~supergcn.kernels.bfloat16.rounded`): the bits of torch's
``torch.mul(g, s[:, None], out=<a bfloat16 tensor>)``, but for a NaN's bits (torch's
vectorised store writes 0xFFFF, this kernel torch's scalar NaN 0x7FC0: a NaN either way).
Torch takes that product at less than half this kernel's rate (32 ms against 13.5 ms for
169,343 x 256 float32 rows on 2 threads of an Intel Xeon: a broadcast multiply, then a
narrowing store); here each row is read once and written once. No sum, so no order to
fix: one float32 multiply and one rounding per element.
"""

from __future__ import annotations

import numpy as np
import torch

from supergcn.kernels.bfloat16 import as_float32, kernel_array, rounded
from supergcn.kernels.jit import njit, prange
from supergcn.kernels.simd import prefer_wide_vectors


@njit(parallel=True, cache=True, nogil=True)
def _scaled_rounded(rows, scale, out):
    scaled = len(scale) > 0
    for r in prange(out.shape[0]):
        prefer_wide_vectors()
        row, written = rows[r], out[r]
        if scaled:
            factor = scale[r]
            for f in range(out.shape[1]):
                written[f] = rounded(as_float32(row[f]) * factor)
        else:
            for f in range(out.shape[1]):
                written[f] = rounded(as_float32(row[f]))


def scaled_rounded(rows: torch.Tensor, scale: torch.Tensor | None,
                   out: torch.Tensor | None = None) -> torch.Tensor:
    """``bfloat16(rows * scale[:, None])`` (module docstring) in one pass.

    Args:
        rows: 2-D float32 or bfloat16 rows.
        scale: a float32 factor per row, or None for none (rounding alone).
        out: a contiguous bfloat16 tensor of ``rows``' shape to write into, or None for a new one.

    Returns:
        The bfloat16 rows (``out`` where given).

    Raises:
        ValueError: on rows that are not 2-D float32 or bfloat16, a scale that is not one
            float32 per row, or an ``out`` of another shape or dtype.
    """
    if rows.dim() != 2 or rows.dtype not in (torch.float32, torch.bfloat16):
        raise ValueError(f"scaled_rounded takes 2-D float32 or bfloat16 rows, not {rows.dtype} of shape "
                         f"{tuple(rows.shape)}")
    if scale is not None and (scale.dtype != torch.float32 or scale.shape != (rows.shape[0],)):
        raise ValueError(f"scaled_rounded takes one float32 scale per row ({rows.shape[0]}), not {scale.dtype} "
                         f"of shape {tuple(scale.shape)}")
    if out is None:
        out = torch.empty(rows.shape, dtype=torch.bfloat16)
    elif out.dtype != torch.bfloat16 or out.shape != rows.shape or not out.is_contiguous():
        raise ValueError(f"scaled_rounded writes into contiguous bfloat16 rows of shape {tuple(rows.shape)}, not "
                         f"{out.dtype} of shape {tuple(out.shape)}")
    _scaled_rounded(kernel_array(rows.detach().contiguous()),
                    np.empty(0, np.float32) if scale is None else scale.detach().contiguous().numpy(),
                    kernel_array(out))
    return out


class _Rounded(torch.autograd.Function):
    @staticmethod
    def forward(ctx, rows):
        return scaled_rounded(rows, None)

    @staticmethod
    def backward(ctx, grad):
        return grad.float()  # exact, as torch's conversion's backward widens


def rounded_rows(rows: torch.Tensor) -> torch.Tensor:
    """``rows.to(torch.bfloat16)`` of 2-D float32 rows in one pass of this module's kernel
    (the same bits but NaN's, module docstring); differentiable, the gradient widened back
    to float32 as torch's conversion gives it. Other tensors take torch's conversion.

    Args:
        rows: a float32 tensor.

    Returns:
        The bfloat16 rows.
    """
    if rows.dim() != 2 or rows.dtype != torch.float32:
        return rows.to(torch.bfloat16)
    return _Rounded.apply(rows)
