"""Quantization kernels: error bounds, unbiasedness, and the wire layout bit for bit."""

import numpy as np
import pytest

from supergcn.errors import SuperGCNError
from supergcn.kernels.quantization import Quantized, dequantize, packed_rows, quantize


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_nearest_round_trip_error_is_at_most_half_a_step(bits):
    rng = np.random.default_rng(bits)
    x = (rng.standard_normal((103, 37)) * rng.uniform(0.01, 10, (103, 1))).astype(np.float32)
    counts = np.array([10, 0, 50, 43])
    q = quantize(x, counts, bits)
    error = np.abs(dequantize(q, counts, bits) - x)
    assert np.all(error <= q.scale[:, None] / 2 * (1 + 1e-5) + 1e-6)
    np.testing.assert_allclose(q.zero_point, x.min(1))
    np.testing.assert_allclose(q.scale, (x.max(1) - x.min(1)) / (2**bits - 1), rtol=1e-6)


def test_rows_already_on_the_grid_survive_exactly():
    rng = np.random.default_rng(0)
    levels = rng.integers(0, 4, (16, 9)).astype(np.float32)
    levels[:, 0], levels[:, 1] = 0, 3  # every row spans the full range
    x = levels * np.float32(0.5) - np.float32(1.0)  # scale 0.5, zero point -1: exact in float32
    q = quantize(x, np.array([16]), 2)
    np.testing.assert_array_equal(dequantize(q, np.array([16]), 2), x)


def test_constant_rows_use_scale_one():
    x = np.full((5, 4), 3.25, dtype=np.float32)
    q = quantize(x, np.array([5]), 2)
    assert np.all(q.scale == 1.0)
    np.testing.assert_array_equal(dequantize(q, np.array([5]), 2), x)


def test_stochastic_rounding_is_unbiased():
    rng = np.random.default_rng(7)
    row = rng.uniform(-1, 1, 64).astype(np.float32)
    x = np.tile(row, (4000, 1))  # the same row quantized 4000 times with independent noise
    q = quantize(x, np.array([4000]), 2, rounding="stochastic", seed=11)
    restored = dequantize(q, np.array([4000]), 2)
    step = q.scale[0]
    # Each element's error has mean 0 and standard deviation <= step / 2.
    mean_error = (restored - x).mean(axis=0)
    assert np.all(np.abs(mean_error) < 5 * (step / 2) / np.sqrt(4000))
    nearest = dequantize(quantize(x[:1], np.array([1]), 2), np.array([1]), 2)
    assert np.abs(nearest - row).mean() > 10 * np.abs(mean_error).mean()  # nearest is biased per element


def test_stochastic_rounding_does_not_depend_on_threads():
    from supergcn.kernels.jit import numba

    x = np.random.default_rng(3).standard_normal((64, 40)).astype(np.float32)
    before = numba.get_num_threads()
    try:
        results = []
        for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
            numba.set_num_threads(threads)
            results.append(quantize(x, np.array([64]), 2, rounding="stochastic", seed=5).packed)
    finally:
        numba.set_num_threads(before)
    np.testing.assert_array_equal(results[0], results[1])


def test_int2_packing_by_hand():
    # Destination 0 gets rows a, b, c, d, e (5 rows -> 2 packed rows, the second padded);
    # destination 1 gets rows f, g. Every row spans levels 0..3 in its first two columns.
    rows = np.array([
        [0, 3, 1],   # a: third column level 1
        [3, 0, 2],   # b: level 2
        [0, 3, 3],   # c
        [3, 0, 0],   # d
        [0, 3, 2],   # e
        [3, 0, 1],   # f
        [0, 3, 3],   # g
    ], dtype=np.float32)
    q = quantize(rows, np.array([5, 2]), 2)
    assert q.packed.shape == (3, 3)
    # Byte column 2 of the first packed row: a=1, b=2, c=3, d=0, first row in the high bits.
    assert q.packed[0, 2] == 0b01_10_11_00
    assert q.packed[0, 0] == 0b00_11_00_11
    assert q.packed[1, 2] == 0b10_00_00_00  # e alone, padding rows are zero
    assert q.packed[2, 2] == 0b01_11_00_00  # f, g: destination 1 starts a new byte row
    np.testing.assert_array_equal(packed_rows(np.array([5, 2]), 2), [2, 1])


def test_int4_packs_two_rows_first_in_high_nibble():
    rows = np.array([[0, 15, 5], [15, 0, 9]], dtype=np.float32)
    q = quantize(rows, np.array([2]), 4)
    assert q.packed.tolist() == [[0x0F, 0xF0, 0x59]]


def test_non_finite_input_is_an_error():
    x = np.zeros((3, 4), dtype=np.float32)
    x[1, 2] = np.inf
    with pytest.raises(SuperGCNError, match="NaN or Inf"):
        quantize(x, np.array([3]), 2)


@pytest.mark.parametrize("bits", [2, 8])
@pytest.mark.parametrize("rounding", ["nearest", "stochastic"])
def test_bfloat16_parameters_keep_the_error_bound(bits, rounding):
    # Rows far from zero relative to their spread are where rounding parameters after
    # packing went wrong: [100.3, 100.31] at Int2 was decoded 0.2 off.
    rng = np.random.default_rng(bits)
    offsets = np.array([100.3, -57.1, 0.0, 3e-4, 1e4], dtype=np.float32)[:, None]
    spreads = np.array([0.01, 2.0, 1.0, 1e-5, 3.0], dtype=np.float32)[:, None]
    x = (offsets + spreads * rng.random((5, 64))).astype(np.float32)
    q = quantize(x, np.array([5]), bits, rounding=rounding, parameter_dtype="bfloat16")
    for parameter in (q.zero_point, q.scale):
        assert np.all((parameter.view(np.uint32) & 0xFFFF) == 0), "not representable in bfloat16"
    assert np.all(q.zero_point <= x.min(1))
    assert np.all(q.zero_point + q.scale * (2**bits - 1) >= x.max(1))
    error = np.abs(dequantize(q, np.array([5]), bits) - x)
    limit = q.scale[:, None] * (0.5 if rounding == "nearest" else 1.0)
    assert np.all(error <= limit * (1 + 1e-5) + 1e-3 * np.abs(x) * 2**-20)


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_reused_output_arrays_give_the_same_bytes(bits):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((13, 6)).astype(np.float32)
    counts = np.array([5, 0, 8])
    fresh = quantize(x, counts, bits, rounding="stochastic", seed=9)
    garbage = Quantized(np.full_like(fresh.packed, 0xFF), np.full(13, np.nan, np.float32),
                        np.full(13, np.nan, np.float32))
    reused = quantize(x, counts, bits, rounding="stochastic", seed=9, out=garbage)
    assert reused is garbage
    for name in ("packed", "zero_point", "scale"):
        np.testing.assert_array_equal(getattr(reused, name), getattr(fresh, name))
    with pytest.raises(ValueError, match="do not fit"):
        quantize(x[:12], counts - np.array([0, 0, 1]), bits, out=garbage)


@pytest.mark.parametrize("parameter_dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("bits", [8, 2])
def test_a_finite_row_whose_range_overflows_is_an_error_not_nan(bits, parameter_dtype):
    """max - min = 6e38 is beyond float32 although both ends are finite: it used to
    quantize silently and decode to NaN (float32 parameters) or garbage (bfloat16)."""
    rows = np.array([[-3e38, 3e38, 1.0, 0.0], [1.0, 2.0, 3.0, 4.0]], dtype=np.float32)
    with pytest.raises(SuperGCNError, match="max - min overflows"):
        quantize(rows, [2], bits, parameter_dtype=parameter_dtype)


def test_the_widest_representable_range_still_round_trips():
    """Just inside the limit (max - min = 3e38) the round trip keeps its error bound."""
    rows = np.array([[-1.5e38, 1.5e38, 0.0, 1e37]], dtype=np.float32)
    quantized = quantize(rows, [1], 8)
    decoded = dequantize(quantized, [1], 8)
    assert np.all(np.isfinite(decoded))
    assert np.max(np.abs(decoded.astype(np.float64) - rows)) <= quantized.scale[0] / 2 * (1 + 1e-6)
