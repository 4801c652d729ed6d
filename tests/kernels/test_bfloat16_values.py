"""bfloat16 bits inside the kernels: widening is exact and rounding is torch's, on every
kind of float32 (normal, subnormal, past bfloat16's range, infinite, NaN)."""

import numpy as np
import torch

from supergcn.kernels.bfloat16 import NAN_BITS, rounded, widened
from supergcn.kernels.jit import njit


@njit(cache=False)
def _round_all(values, out):
    for i in range(len(values)):
        out[i] = rounded(values[i])


@njit(cache=False)
def _widen_all(bits, out):
    for i in range(len(bits)):
        out[i] = widened(bits[i])


def every_kind_of_float32() -> np.ndarray:
    rng = np.random.default_rng(0)
    random_bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    ties = (np.arange(0, 2**16, dtype=np.uint32) << 16 | 0x8000).view(np.float32)  # exactly half-way
    edges = np.array([0.0, -0.0, 1.0, np.inf, -np.inf, 3.4e38, -3.4e38, 1e-40, -1e-45, 3.3961776e38],
                     np.float32)
    return np.concatenate([random_bits, ties, edges])


def test_rounding_is_torchs_and_nan_is_its_scalar_nan():
    values = every_kind_of_float32()
    got = np.empty(len(values), np.uint16)
    _round_all(values, got)
    expected = torch.from_numpy(values).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    nan = np.isnan(values)
    assert nan.any() and np.array_equal(got[~nan], expected[~nan])
    assert (got[nan] == NAN_BITS).all()


def test_widening_is_exact():
    bits = np.arange(2**16, dtype=np.uint32).astype(np.uint16)
    got = np.empty(len(bits), np.float32)
    _widen_all(bits, got)
    expected = torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16).float().numpy()
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))  # NaN payloads included
