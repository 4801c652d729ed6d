"""The float32 sum of two layers' terms, either of which may be bfloat16, in one pass.

A bf16 run's GEMMs give bfloat16 rows; where a layer adds two of them (GraphSAGE's
neighbour and root terms, GIN's), the sum is taken in float32, as the next step reads it:

    out = float32(a) + float32(b),

each widening exact, the addition rounded once in float32: the bits of torch's
``a.float() + b.float()`` (and of its mixed ``a + b`` for a float32 ``a``). Torch takes
that in two or three passes over the rows (a widening copy, then an addition of mixed
types, which it runs at half the rate of a float32 one); this kernel reads each input once
and writes the sum once. Backward, the gradient of either term is the sum's gradient in
that term's type: rounded to bfloat16 once (torch's conversion) and shared by both
bfloat16 terms, where autograd would round it once per term.
"""

from __future__ import annotations

import torch

from supergcn.kernels.bfloat16 import as_float32, kernel_array
from supergcn.kernels.jit import njit, prange
from supergcn.kernels.rounding import scaled_rounded
from supergcn.kernels.simd import prefer_wide_vectors


@njit(parallel=True, cache=True, nogil=True)
def _widening_add(a, b, out):
    for r in prange(out.shape[0]):
        prefer_wide_vectors()
        left, right, row = a[r], b[r], out[r]
        for f in range(out.shape[1]):
            row[f] = as_float32(left[f]) + as_float32(right[f])


@njit(parallel=True, cache=True, nogil=True)
def _widening_add_row(a, row_b, out):
    for r in prange(out.shape[0]):
        prefer_wide_vectors()
        left, row = a[r], out[r]
        for f in range(out.shape[1]):
            row[f] = as_float32(left[f]) + as_float32(row_b[f])


class _WideningAdd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.dtypes, ctx.broadcast = (a.dtype, b.dtype), b.dim() == 1
        out = torch.empty(a.shape, dtype=torch.float32)
        kernel = _widening_add_row if ctx.broadcast else _widening_add
        kernel(kernel_array(a.detach().contiguous()), kernel_array(b.detach().contiguous()), out.numpy())
        return out

    @staticmethod
    def backward(ctx, grad):
        a_dtype, b_dtype = ctx.dtypes
        if ctx.broadcast:  # a row added to every row: its gradient is the column sums
            return scaled_rounded(grad, None) if a_dtype == torch.bfloat16 else grad, grad.sum(0).to(b_dtype)
        rounded = scaled_rounded(grad, None) if torch.bfloat16 in ctx.dtypes else None
        return tuple(rounded if dtype == torch.bfloat16 else grad for dtype in ctx.dtypes)


def widening_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``float32(a) + float32(b)`` of two float32 or bfloat16 tensors (module docstring).

    Two 2-D tensors of one shape, or a 2-D ``a`` and a row ``b`` of its width added to
    each of its rows (a bias), take the one-pass kernel; anything else takes torch's
    widening and addition, with the same bits.

    Args:
        a, b: float32 or bfloat16 tensors.

    Returns:
        The float32 sum.
    """
    fits = b.shape == a.shape or (b.dim() == 1 and b.shape[0] == a.shape[-1])
    if a.dim() == 2 and fits and {a.dtype, b.dtype} <= {torch.float32, torch.bfloat16} \
            and torch.bfloat16 in (a.dtype, b.dtype):
        return _WideningAdd.apply(a, b)
    return a.float() + b.float()
