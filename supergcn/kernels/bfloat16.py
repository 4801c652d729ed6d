"""bfloat16 values inside the kernels, held as their bit patterns (uint16: numpy has no
bfloat16).

A bfloat16 is the upper half of a float32: widening shifts its 16 bits up, exactly
(:func:`widened`); rounding a float32 to it keeps the upper half rounded to nearest, ties
to even, as torch converts (:func:`rounded`):

    bits = (u + 0x7FFF + ((u >> 16) & 1)) >> 16,   u the float32's bits,

which carries into the exponent where the mantissa overflows (so a value past bfloat16's
largest becomes infinity) and leaves ±infinity as it is; a NaN becomes torch's scalar
NaN, 0x7FC0. :func:`as_float32` reads an element of either kind of array as float32, so
that one kernel body serves float32 rows and bfloat16 ones (a specialisation each).
"""

from __future__ import annotations

import numpy as np
import torch
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload

from supergcn.kernels.jit import njit

#: torch's bfloat16 NaN (its scalar conversion's).
NAN_BITS = np.uint16(0x7FC0)


@intrinsic
def _float_of_bits(typingctx, bits):
    """The float32 whose bits are the uint32 ``bits``."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.uint32), codegen


@intrinsic
def _bits_of_float(typingctx, value):
    """The bits of the float32 ``value``, as a uint32."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.uint32(types.float32), codegen


@njit(inline="always")
def widened(bits):
    """The float32 value of bfloat16 ``bits`` (exact)."""
    return _float_of_bits(np.uint32(bits) << np.uint32(16))


@njit(inline="always")
def rounded(value):
    """The bfloat16 bits nearest the float32 ``value`` (ties to even; NaN: :data:`NAN_BITS`)."""
    if value != value:
        return NAN_BITS
    u = _bits_of_float(np.float32(value))
    return np.uint16((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))


def as_float32(value):
    """An element as float32: bfloat16 bits widened, a float32 as it is (compiled only)."""
    raise NotImplementedError("as_float32 runs inside numba kernels only")


@overload(as_float32, inline="always")
def _as_float32(value):
    if value == types.uint16:
        return lambda value: widened(value)
    return lambda value: value


def kernel_array(t: torch.Tensor) -> np.ndarray:
    """A contiguous tensor as the kernels read it: its numpy view, bfloat16 as its bit
    patterns (uint16), for numpy has no bfloat16.

    Args:
        t: a contiguous CPU tensor (bfloat16 or a dtype numpy has).

    Returns:
        A numpy array sharing ``t``'s memory.
    """
    return t.view(torch.int16).numpy().view(np.uint16) if t.dtype == torch.bfloat16 else t.numpy()
