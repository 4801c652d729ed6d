"""Per-row asymmetric quantization of exchanged rows to 8, 4 or 2 bits (SuperGCN §6).

For a row x (one node's embedding or gradient):

    zero_point = min(x),   scale = (max(x) - min(x)) / (2^b - 1)   (scale = 1 if max == min),
    q = round((x - zero_point) * (1 / scale)),   x' = q * scale + zero_point.

``nearest`` rounding (upstream) keeps ``|x' - x| <= scale / 2``; ``stochastic`` rounding
(AdaQP) uses q = floor((x - zero_point) / scale + u), u ~ U[0, 1), which is unbiased:
E[x'] = x. The uniform numbers come from a counter-based hash of (seed, row, column), so
results do not depend on the thread count.

Wire layout (upstream compatible): with r = 8 / b rows per byte, byte [g, f] holds
column f of rows r*g .. r*g + r - 1, the first row in the highest bits (row r*g + k
in bits (r-1-k)*b .. (r-1-k)*b + b - 1). Each destination's chunk of rows is padded to a
multiple of r rows, so no byte mixes two destinations, and the packed chunk for ``n``
rows is ceil(n / r) x F bytes. The per-row parameters (zero_point, scale) travel
separately, as float32 or as bfloat16; bfloat16 parameters are rounded *before* packing
(zero point down, scale up), so the bounds above hold for the values the receiver uses.

Each group of r rows is read from memory once: the min/max pass, the parameters and the
quantize-and-pack pass run back to back on the same rows while they are in cache. The
inner loops multiply by a reciprocal instead of dividing.
"""

from __future__ import annotations

import math

import numpy as np

from supergcn.errors import SuperGCNError
from supergcn.kernels.jit import njit, prange
from supergcn.naming import QUANTIZED_BITS, ROUNDINGS


def rows_per_byte(bits: int) -> int:
    """Rows that share a byte at ``bits`` bits: 8 / bits.

    Args:
        bits: 8, 4 or 2.

    Returns:
        1, 2 or 4.

    Raises:
        ValueError: ``bits`` is not one of :data:`supergcn.naming.QUANTIZED_BITS`.
    """
    if bits not in QUANTIZED_BITS:
        raise ValueError(f"bits must be one of {QUANTIZED_BITS}, got {bits}")
    return 8 // bits


def packed_rows(counts: np.ndarray, bits: int) -> np.ndarray:
    """Packed byte rows of each destination chunk: ceil(count / rows per byte).

    Args:
        counts: rows per destination.
        bits: 8, 4 or 2.

    Returns:
        int64 byte rows per destination.

    Raises:
        ValueError: ``bits`` is not 8, 4 or 2.
    """
    per_byte = rows_per_byte(bits)
    return -(-np.asarray(counts, dtype=np.int64) // per_byte)


def _groups(counts: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """First row and number of real rows (<= rows per byte) of every packed byte row."""
    counts = np.asarray(counts, dtype=np.int64)
    per_byte = rows_per_byte(bits)
    groups = packed_rows(counts, bits)
    chunk_start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    chunk = np.repeat(np.arange(len(counts)), groups)
    within = np.arange(int(groups.sum())) - np.repeat(np.concatenate([[0], np.cumsum(groups)[:-1]]), groups)
    first = chunk_start[chunk] + within * per_byte
    size = np.minimum(per_byte, counts[chunk] - within * per_byte)
    return first.astype(np.int64), size.astype(np.int64)


@njit(inline="always")
def _uniform(seed, row, column):
    """A uniform number in [0, 1) from a splitmix64 hash of (seed, row, column)."""
    z = np.uint64(seed) ^ (np.uint64(row) * np.uint64(0x9E3779B97F4A7C15)) ^ (
        np.uint64(column) * np.uint64(0xC2B2AE3D27D4EB4F))
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return np.float32(z >> np.uint64(40)) * np.float32(1.0 / (1 << 24))


@njit(inline="always")
def _bfloat16_toward(value, upward):
    """The nearest bfloat16 value at or below (at or above if ``upward``) ``value``; NaN
    and Inf stay as they are (their mantissa has no integer to round to)."""
    if not np.isfinite(value):
        return np.float32(value)
    mantissa, exponent = math.frexp(value)
    kept = math.ceil(mantissa * 256.0) if upward else math.floor(mantissa * 256.0)
    return np.float32(math.ldexp(kept / 256.0, exponent))


@njit(inline="always")
def _ordered_key(bits):
    """Map float32 bits (as int32) to an int32 that sorts like the floats (and back).

    Integer min/max reductions vectorize where float ones do not: LLVM needs a
    function-wide no-NaN attribute for those, which numba does not set.
    """
    return bits ^ ((bits >> 31) & np.int32(0x7FFFFFFF))


@njit(inline="always")
def _row_range(bits):
    """(min key, max key, all finite) of one row given as int32 bits."""
    low = np.int32(0x7FFFFFFF)
    high = np.int32(-0x80000000)
    exponent = np.int32(0x7F800000)
    not_finite = np.int32(0)
    for f in range(bits.shape[0]):
        key = _ordered_key(bits[f])
        low = min(low, key)
        high = max(high, key)
        not_finite |= np.int32((bits[f] & exponent) == exponent)
    return low, high, not_finite == 0


@njit(parallel=True, fastmath=False, cache=True)
def _quantize_pack(x, x_bits, first, size, bits, stochastic, seed, packed, zero_point, scale, finite, bfloat16):
    num_features = x.shape[1]
    per_byte = 8 // bits
    top = np.float32((1 << bits) - 1)
    # The row minimum and maximum pass through the parameter arrays' bits to turn the
    # integer keys back into floats.
    zero_point_bits = zero_point.view(np.int32)
    scale_bits = scale.view(np.int32)
    for g in prange(len(first)):
        for k in range(size[g]):
            r = first[g] + k
            if num_features:
                low_key, high_key, row_finite = _row_range(x_bits[r])
                if not row_finite:
                    finite[g] = False
                zero_point_bits[r] = _ordered_key(low_key)
                scale_bits[r] = _ordered_key(high_key)
            else:
                zero_point[r] = 0
                scale[r] = 0
            low = zero_point[r]
            high = scale[r]
            if bfloat16:
                # Parameters that travel as bfloat16 are rounded before packing, the zero
                # point down and the scale up, so the levels still span [min, max] and the
                # receiver decodes with exactly the values the sender encoded with.
                low = _bfloat16_toward(low, False)
            step = (high - low) / top
            if step <= 0:
                step = np.float32(1.0)
            if bfloat16:
                step = _bfloat16_toward(step, True)
            # A finite row whose max - min overflows float32 (or the wire type, once
            # rounded outward) has no finite step: it would decode to NaN or garbage.
            if not (np.isfinite(step) and np.isfinite(low)):
                finite[g] = False
            zero_point[r] = low
            scale[r] = step
        out = packed[g]
        for f in range(num_features):
            out[f] = 0
        for k in range(size[g]):
            r = first[g] + k
            row = x[r]
            low = zero_point[r]
            inverse = np.float32(1.0) / scale[r]
            shift = (per_byte - 1 - k) * bits
            for f in range(num_features):
                if stochastic:
                    level = np.floor((row[f] - low) * inverse + _uniform(seed, r, f))
                else:
                    level = np.floor((row[f] - low) * inverse + np.float32(0.5))
                level = min(max(level, np.float32(0)), top)
                out[f] |= np.uint8(np.int32(level) << shift)


@njit(parallel=True, cache=True)
def _unpack_dequantize(packed, first, size, bits, zero_point, scale, out):
    num_features = packed.shape[1]
    mask = (1 << bits) - 1
    per_byte = 8 // bits
    for g in prange(len(first)):
        source = packed[g]
        for k in range(size[g]):
            r = first[g] + k
            row = out[r]
            low = zero_point[r]
            step = scale[r]
            shift = (per_byte - 1 - k) * bits
            for f in range(num_features):
                row[f] = np.float32((np.int32(source[f]) >> shift) & mask) * step + low


class Quantized:
    """Packed rows of a send buffer plus their per-row parameters.

    Args:
        packed: the packed bytes, ceil(n / (8 / bits)) x F uint8.
        zero_point: float32 zero point of every row.
        scale: float32 scale of every row.
    """

    def __init__(self, packed: np.ndarray, zero_point: np.ndarray, scale: np.ndarray) -> None:
        self.packed = packed
        self.zero_point = zero_point
        self.scale = scale


def quantize(x: np.ndarray, counts: np.ndarray, bits: int, rounding: str = "nearest", seed: int = 0,
             parameter_dtype: str = "float32", out: Quantized | None = None) -> Quantized:
    """Quantize and pack the rows of ``x`` (float32, rows grouped by destination ``counts``).

    Args:
        x: n x F float32 rows, grouped by destination.
        counts: rows per destination, in order; each destination's chunk is padded to
            whole bytes.
        bits: 8, 4 or 2.
        rounding: ``nearest`` or ``stochastic`` (unbiased).
        seed: seed of the stochastic-rounding stream.
        parameter_dtype: wire type the parameters will travel as; with ``bfloat16`` they
            are rounded outward first, so the error bounds hold for the decoded values.
        out: arrays to write into (allocated when None), shaped as the result.

    Returns:
        :class:`Quantized`: the packed ceil(n / (8 / bits)) x F bytes and float32
        zero points and scales, one per row.

    Raises:
        SuperGCNError: a row holds NaN or Inf, or its max - min overflows float32 (or
            the wire type of the parameters).
        ValueError: an unknown ``rounding``, ``bits`` other than 8, 4 or 2, or ``counts``
            that do not add up to the rows of ``x``, or ``out`` of other shapes.
    """
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {ROUNDINGS}, got {rounding!r}")
    x = np.ascontiguousarray(x, dtype=np.float32)
    counts = np.asarray(counts, dtype=np.int64)
    if counts.sum() != x.shape[0]:
        raise ValueError(f"counts add up to {counts.sum()} rows, x has {x.shape[0]}")
    first, size = _groups(counts, bits)
    if out is None:
        out = Quantized(np.empty((len(first), x.shape[1]), dtype=np.uint8), np.empty(x.shape[0], dtype=np.float32),
                        np.empty(x.shape[0], dtype=np.float32))
    elif (out.packed.shape != (len(first), x.shape[1]) or out.packed.dtype != np.uint8
          or any(a.shape != (x.shape[0],) or a.dtype != np.float32 for a in (out.zero_point, out.scale))):
        raise ValueError(f"output arrays {out.packed.shape}, {out.zero_point.shape} do not fit {x.shape[0]} rows "
                         f"of {x.shape[1]} at {bits} bits")
    packed, zero_point, scale = out.packed, out.zero_point, out.scale
    finite = np.ones(len(first), dtype=np.bool_)
    _quantize_pack(x, x.view(np.int32), first, size, bits, rounding == "stochastic", np.uint64(seed % 2**64), packed,
                   zero_point, scale, finite, parameter_dtype == "bfloat16")
    if not finite.all():
        raise SuperGCNError(f"rows to quantize hold NaN or Inf, or values spread wider than {parameter_dtype} can "
                            "step through (max - min overflows): the model diverged",
                            "lower the learning rate (--lr), or exchange float32 (--bits 32)")
    return out


def dequantize(quantized: Quantized, counts: np.ndarray, bits: int, out: np.ndarray | None = None) -> np.ndarray:
    """Unpack and dequantize rows packed by :func:`quantize` with the same ``counts``.

    Args:
        quantized: packed bytes and the float32 zero point and scale of every row.
        counts: rows per source chunk, as the sender passed them to :func:`quantize`.
        bits: 8, 4 or 2.
        out: an n x F float32 array to write into (allocated when None).

    Returns:
        The n x F float32 rows ``q * scale + zero_point``.

    Raises:
        ValueError: ``bits`` is not 8, 4 or 2.
    """
    counts = np.asarray(counts, dtype=np.int64)
    first, size = _groups(counts, bits)
    if out is None:
        out = np.empty((int(counts.sum()), quantized.packed.shape[1]), dtype=np.float32)
    _unpack_dequantize(quantized.packed, first, size, bits, quantized.zero_point, quantized.scale, out)
    return out
