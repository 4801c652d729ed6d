"""Sums over a row whose order the code fixes, so that every CPU gives the same bits.

A sum over a row's values, written as a loop, is one chain of dependent additions: the
CPU waits an addition's latency for each value unless the compiler reorders the chain
(LLVM's ``reassoc`` fast-math flag), and how it reorders depends on the CPU it compiles
for — Zen 4 and Sapphire Rapids unroll into other partial sums than Skylake, and targets
with FMA fuse a product into the addition that follows it. So the kernels carry no
fast-math flag, and where a row is summed they spell the reordering out instead:
``LANES`` partial sums in float64, value f going to partial ``f mod LANES`` in the order
of f, then folded by halves (partial j += partial j + LANES/2, down to one):

    total = fold(p),   p_j = sum_{f = j (mod LANES), in order} v_f

The partial sums are independent chains that LLVM keeps in vector registers and adds a
whole vector at a time (no reassociation needed), so the sum runs at the machine's
vector rate on every target and its bits are those of this formula on every target.
Each product ``a_f * b_f`` is rounded in the inputs' dtype before it is added, as the
code writes it: no contraction into a fused multiply-add.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from supergcn.kernels.jit import njit
from supergcn.kernels.simd import _Block, _splat, stack_buffer

#: Partial sums of a row: 16 float64 (two AVX-512 vectors, four AVX ones).
LANES = 16
_FLOAT64 = np.empty(0, np.float64)  # the dtype of the partial sums, for stack_buffer
#: What :func:`_lanes_add` adds per value f: v_f, a_f * b_f, or (v_f - c)^2.
_SUM, _DOT, _SQUARES = 0, 1, 2


def _partials_vector(builder, buffer):
    return builder.bitcast(buffer, ir.VectorType(ir.DoubleType(), LANES).as_pointer())


@intrinsic
def _lanes_zero(typingctx, buffer):
    """``buffer[0:LANES] = 0`` (the partial sums, one vector store)."""
    def codegen(context, builder, signature, args):
        builder.store(ir.Constant(ir.VectorType(ir.DoubleType(), LANES), None), _partials_vector(builder, args[0]))
        return context.get_dummy_value()
    return types.none(buffer), codegen


@intrinsic
def _lanes_add(typingctx, buffer, kind, masked, left, right, start, count, centre):
    """Partial sum j (of ``buffer``) += the term of value ``start + j`` for j < ``count``
    (the others unchanged when ``masked``, a compile-time flag; all ``LANES`` otherwise):
    ``left[f]`` (kind 0), ``left[f] * right[f]`` rounded in their dtype (kind 1), or
    ``(left[f] - centre)^2`` in float64 (kind 2). ``left`` and ``right`` are contiguous 1-D
    arrays of one dtype; the terms are explicit vectors, the additions one per lane."""
    if not isinstance(kind, types.IntegerLiteral) or not isinstance(masked, types.BooleanLiteral):
        return None  # Numba retries with the literal values
    if any(a.ndim != 1 or a.layout != "C" or a.dtype != left.dtype for a in (left, right)) or \
            left.dtype not in (types.float32, types.float64):
        raise TypeError(f"_lanes_add takes two contiguous 1-D float32 or float64 arrays of one dtype, not {left} "
                        f"and {right}")
    operation, is_masked = kind.literal_value, masked.literal_value

    def codegen(context, builder, signature, args):
        doubles = ir.VectorType(ir.DoubleType(), LANES)
        block = _Block(context, builder, left.dtype, LANES, LANES, is_masked, args[6])

        def row(array, array_type):
            view = context.make_array(array_type)(context, builder, array)
            return cgutils.get_item_pointer(context, builder, array_type, view, [args[5]], wraparound=False)

        def widened(vector):
            return vector if block.element == ir.DoubleType() else builder.fpext(vector, doubles)
        values = block.load(row(args[3], left), 0)
        if operation == _DOT:
            term = widened(builder.fmul(values, block.load(row(args[4], right), 0)))
        elif operation == _SQUARES:
            centre = context.cast(builder, args[7], signature.args[7], types.float64)
            difference = builder.fsub(widened(values), _splat(builder, centre, LANES))
            term = builder.fmul(difference, difference)
        else:
            term = widened(values)
        pointer = _partials_vector(builder, args[0])
        before = builder.load(pointer)
        after = builder.fadd(before, term)
        builder.store(builder.select(block.mask, after, before) if is_masked else after, pointer)
        return context.get_dummy_value()
    return types.none(buffer, kind, masked, left, right, start, count, centre), codegen


@intrinsic
def _lanes_fold(typingctx, buffer):
    """The partial sums folded by halves (module docstring): a float64."""
    def codegen(context, builder, signature, args):
        int32 = ir.IntType(32)
        vector = builder.load(_partials_vector(builder, args[0]))
        width = LANES
        while width > 1:
            width //= 2
            low = builder.shuffle_vector(vector, vector, ir.Constant(ir.VectorType(int32, width), list(range(width))))
            high = builder.shuffle_vector(vector, vector, ir.Constant(ir.VectorType(int32, width),
                                                                      list(range(width, 2 * width))))
            vector = builder.fadd(low, high)
        return builder.extract_element(vector, int32(0))
    return types.float64(buffer), codegen


@njit(nogil=True, cache=True, inline="always")
def _ordered(kind, left, right, centre):
    n = len(left)
    partial = stack_buffer(LANES, _FLOAT64)
    _lanes_zero(partial)
    whole = n - n % LANES
    for start in range(0, whole, LANES):
        _lanes_add(partial, kind, False, left, right, start, LANES, centre)
    if whole < n:
        _lanes_add(partial, kind, True, left, right, whole, n - whole, centre)
    return _lanes_fold(partial)


@njit(nogil=True, cache=True, inline="always")
def ordered_sum(values):
    """sum_f values[f] in the module docstring's order (float64).

    Args:
        values: a contiguous 1-D array.

    Returns:
        The sum, a float64.
    """
    return _ordered(_SUM, values, values, 0.0)


@njit(nogil=True, cache=True, inline="always")
def ordered_squares(values, centre):
    """sum_f (values[f] - centre)^2 in the module docstring's order (float64 throughout).

    Args:
        values: a contiguous 1-D array.
        centre: the value subtracted from each.

    Returns:
        The sum, a float64.
    """
    return _ordered(_SQUARES, values, values, centre)


@njit(nogil=True, cache=True, inline="always")
def ordered_dot(left, right):
    """sum_f left[f] * right[f] in the module docstring's order (float64; each product
    rounded in the inputs' dtype).

    Args:
        left: a contiguous 1-D array.
        right: a contiguous 1-D array of the same dtype, at least as long (not checked:
            a raise in a kernel's parallel loop costs the activation kernel half its speed).

    Returns:
        The dot product, a float64.
    """
    return _ordered(_DOT, left, right, 0.0)


def reference_sum(terms: np.ndarray) -> np.ndarray:
    """The module docstring's order in numpy, over the last axis of ``terms`` (each term
    already rounded as the kernel rounds it): for checking the kernels.

    Args:
        terms: ``(..., n)`` values.

    Returns:
        The float64 sums, shape ``terms.shape[:-1]``.
    """
    n = terms.shape[-1]
    padded = np.full((*terms.shape[:-1], -(-n // LANES) * LANES), -0.0)
    padded[..., :n] = terms
    partial = np.zeros((*terms.shape[:-1], LANES), np.float64)
    for start in range(0, padded.shape[-1], LANES):  # in order of f; -0.0 pads: x + -0.0 = x, always
        partial = partial + padded[..., start:start + LANES]
    width = LANES
    while width > 1:
        width //= 2
        partial = partial[..., :width] + partial[..., width:2 * width]
    return partial[..., 0]
