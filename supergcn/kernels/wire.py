"""What one boundary exchange puts on the wire, and how many bytes that is.

A float32 exchange sends each row's ``width`` values as they are (4 bytes each); a
bfloat16 exchange (16 bits, upstream's ``--num_bits 16``) sends each value's upper 16
bits, rounded to nearest even, in one message of 2 bytes a value (:func:`to_bfloat16`). A
quantized b-bit exchange sends two messages (paper §6, upstream and AdaQP alike):

* the data: rows packed 8/b to a byte column by :func:`supergcn.kernels.quantization.quantize`,
  each destination's chunk padded to whole bytes (:func:`~supergcn.kernels.quantization.packed_rows`);
* the parameters: one (zero point, scale) pair per row, as bfloat16 (the upper 16 bits
  of the float32, already rounded outward by the quantizer) or as float32.
"""

from __future__ import annotations

import numpy as np
import torch

from supergcn.kernels.quantization import Quantized, dequantize, packed_rows, quantize
from supergcn.kernels.rounding import scaled_rounded
from supergcn.naming import DEFAULT_PARAMETER_DTYPE, PARAMETER_DTYPES

FP32_BYTES = 4
BF16_BYTES = 2


def to_bfloat16(rows: np.ndarray, out: np.ndarray) -> np.ndarray:
    """float32 ``rows`` as bfloat16 bit patterns in ``out`` (uint16, their shape): each value
    rounded to the nearest bfloat16, ties to even, as torch converts (NaN stays NaN, ±inf
    stays ±inf; a value past bfloat16's largest rounds to ±inf), in one pass of the kernel
    the bf16 gradients use (:func:`~supergcn.kernels.rounding.scaled_rounded`).

    Args:
        rows: float32, C-contiguous.
        out: uint16, of ``rows``' shape.

    Returns:
        ``out``.
    """
    scaled_rounded(torch.from_numpy(rows), None, out=torch.from_numpy(out.view(np.int16)).view(torch.bfloat16))
    return out


def from_bfloat16(wire: np.ndarray, out: np.ndarray) -> np.ndarray:
    """The float32 values of the bfloat16 bit patterns ``wire`` (uint16), exactly, into ``out``.

    Args:
        wire: uint16 bit patterns, C-contiguous.
        out: float32, of ``wire``'s shape.

    Returns:
        ``out``.
    """
    torch.from_numpy(out).copy_(torch.from_numpy(wire.view(np.int16)).view(torch.bfloat16))
    return out


def parameters_to_wire(quantized: Quantized, parameter_dtype: str) -> np.ndarray:
    """The rows' (zero point, scale) pairs as an n x 2 array of the wire type."""
    pair = np.stack([quantized.zero_point, quantized.scale], axis=1)
    if parameter_dtype == "bfloat16":
        return (pair.view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    return pair


def parameters_from_wire(wire: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(zero points, scales) as float32 from the n x 2 array :func:`parameters_to_wire` made."""
    pair = (wire.astype(np.uint32) << np.uint32(16)).view(np.float32) if wire.dtype == np.uint16 else wire
    return np.ascontiguousarray(pair[:, 0]), np.ascontiguousarray(pair[:, 1])


def quantize_to_wire(rows: np.ndarray, counts: np.ndarray, bits: int, rounding: str, seed: int,
                     parameter_dtype: str, out: Quantized) -> tuple[Quantized, np.ndarray]:
    """A sender's half of a b-bit exchange: its rows packed into ``out`` and their
    parameters on the wire (:func:`~supergcn.kernels.quantization.quantize`)."""
    quantized = quantize(rows, counts, bits, rounding, seed, parameter_dtype, out=out)
    return quantized, parameters_to_wire(quantized, parameter_dtype)


def dequantize_from_wire(packed: np.ndarray, wire: np.ndarray, counts: np.ndarray, bits: int,
                         out: np.ndarray) -> np.ndarray:
    """A receiver's half: the float32 rows from what :func:`quantize_to_wire` sent."""
    zero_point, scale = parameters_from_wire(wire)
    return dequantize(Quantized(packed, zero_point, scale), counts, bits, out=out)


def wire_bytes(rows: np.ndarray, width: int, bits: int,
               parameter_dtype: str = DEFAULT_PARAMETER_DTYPE) -> tuple[np.ndarray, np.ndarray]:
    """(data bytes, parameter bytes) for each entry of ``rows``, the rows one sender sends
    one receiver per exchange, at ``width`` features and ``bits`` per value."""
    rows = np.asarray(rows, dtype=np.int64)
    if bits in (32, 16):
        return rows * width * bits // 8, np.zeros_like(rows)
    parameter_bytes = PARAMETER_DTYPES[parameter_dtype]
    return packed_rows(rows.ravel(), bits).reshape(rows.shape) * width, rows * 2 * parameter_bytes


def layer_bytes(rows_per_pair, width: int, bits: int,
                parameter_dtype: str = DEFAULT_PARAMETER_DTYPE) -> tuple[int, int]:
    """Total (data bytes, parameter bytes) of one layer's exchange (:func:`wire_bytes`)."""
    data, params = wire_bytes(rows_per_pair, width, bits, parameter_dtype)
    return int(data.sum()), int(params.sum())
