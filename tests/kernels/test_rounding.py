"""Rows scaled and rounded to bfloat16 (:mod:`supergcn.kernels.rounding`) against torch's
``torch.mul(g, s[:, None], out=<bfloat16>)``: the same bits for every non-NaN value
(subnormals, ties, values past bfloat16's range, infinities), NaN kept a NaN."""

import numpy as np
import pytest
import torch

from supergcn.kernels.bfloat16 import NAN_BITS
from supergcn.kernels.rounding import rounded_rows, scaled_rounded


def bits(t: torch.Tensor) -> np.ndarray:
    return t.view(torch.int16).numpy().view(np.uint16)


def every_kind_of_float32() -> np.ndarray:
    """Random bit patterns (every kind of float32, NaN included), exact ties, and edges."""
    random_bits = np.random.default_rng(0).integers(0, 2**32, 50_000, dtype=np.uint64).astype(np.uint32)
    ties = np.arange(0, 2**16, 7, dtype=np.uint32) << 16 | 0x8000
    edges = np.array([0.0, -0.0, 1.0, np.inf, -np.inf, 3.4e38, -3.4e38, 1e-40, -1e-45, 3.3961776e38], np.float32)
    return np.concatenate([random_bits.view(np.float32), ties.view(np.float32), edges])


def rows_and_scale(width=53):
    values = every_kind_of_float32()
    rows = torch.from_numpy(values[: len(values) // width * width].reshape(-1, width).copy())
    scale = torch.from_numpy(np.random.default_rng(1).uniform(-2, 2, len(rows)).astype(np.float32))
    scale[:3] = torch.tensor([0.0, 1.0, 2.0**-126])  # 0 * inf: NaN; 1: rounding alone; into the subnormals
    return rows, scale


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("scaled", [True, False])
def test_the_rows_have_the_bits_of_torchs_product_rounded(dtype, scaled):
    rows, scale = rows_and_scale()
    rows = rows.to(dtype)
    got = scaled_rounded(rows, scale if scaled else None)
    expected = torch.empty(rows.shape, dtype=torch.bfloat16)
    torch.mul(rows.float(), scale[:, None] if scaled else 1.0, out=expected)
    nan = expected.isnan()
    assert nan.any() and got.dtype == torch.bfloat16
    assert np.array_equal(bits(got)[~nan.numpy()], bits(expected)[~nan.numpy()])
    assert (bits(got)[nan.numpy()] == NAN_BITS).all()


def test_it_writes_into_the_buffer_given():
    rows, scale = rows_and_scale()
    out = torch.empty(rows.shape, dtype=torch.bfloat16)
    assert scaled_rounded(rows, scale, out=out) is out


@pytest.mark.parametrize(("rows", "scale", "out", "problem"), [
    (torch.ones(4, 3, dtype=torch.float64), None, None, "float32 or bfloat16 rows"),
    (torch.ones(4), None, None, "2-D"),
    (torch.ones(4, 3), torch.ones(3), None, "one float32 scale per row"),
    (torch.ones(4, 3), torch.ones(4, dtype=torch.float64), None, "one float32 scale per row"),
    (torch.ones(4, 3), None, torch.empty(4, 3), "contiguous bfloat16 rows of shape"),
    (torch.ones(4, 3), None, torch.empty(3, 4, dtype=torch.bfloat16), "contiguous bfloat16 rows of shape"),
])
def test_bad_arguments_are_refused_by_name(rows, scale, out, problem):
    with pytest.raises(ValueError, match=problem):
        scaled_rounded(rows, scale, out)


def test_rounded_rows_is_torchs_conversion_with_its_gradient():
    rows, _ = rows_and_scale()
    rows = rows.nan_to_num(0.0).clamp(-1e30, 1e30).requires_grad_()  # finite: gradients to compare
    got = rounded_rows(rows)
    expected = rows.to(torch.bfloat16)
    assert torch.equal(got.view(torch.int16), expected.view(torch.int16))
    grad = torch.randn(rows.shape).bfloat16()
    assert torch.equal(torch.autograd.grad(got, rows, grad)[0], torch.autograd.grad(expected, rows, grad)[0])
    other = torch.randn(3, 4, 5)  # not rows: torch's conversion
    assert torch.equal(rounded_rows(other), other.to(torch.bfloat16))
