"""The widening sum (:mod:`supergcn.kernels.widening`) against torch's ``a.float() + b.float()``:
the same bits forward, including NaN, infinities and values past bfloat16's range, and the
gradients autograd gives that composition."""

import pytest
import torch

from supergcn.kernels.widening import widening_add


def terms(dtype_a, dtype_b, rows=513, width=37):
    torch.manual_seed(rows + width)
    a, b = torch.randn(rows, width) * 300, torch.randn(rows, width) * 3
    a[0, :4] = torch.tensor([float("nan"), float("inf"), -float("inf"), 3.4e38])
    b[0, :4] = torch.tensor([1.0, -float("inf"), 2.0, 3.4e38])  # inf - inf: NaN; past bf16's largest: inf
    return a.to(dtype_a), b.to(dtype_b)


@pytest.mark.parametrize(("dtype_a", "dtype_b"), [(torch.float32, torch.bfloat16), (torch.bfloat16, torch.bfloat16),
                                                  (torch.bfloat16, torch.float32)])
def test_the_sum_has_the_bits_of_torchs_widened_sum(dtype_a, dtype_b):
    a, b = terms(dtype_a, dtype_b)
    out = widening_add(a, b)
    expected = a.float() + b.float()
    assert out.dtype == torch.float32
    assert torch.equal(out.view(torch.int32)[1:], expected.view(torch.int32)[1:])
    assert torch.equal(out.isnan(), expected.isnan()) and torch.equal(out[~out.isnan()], expected[~expected.isnan()])


@pytest.mark.parametrize(("dtype_a", "dtype_b"), [(torch.float32, torch.bfloat16), (torch.bfloat16, torch.bfloat16)])
def test_each_term_gets_the_sums_gradient_in_its_own_type(dtype_a, dtype_b):
    a, b = (t.requires_grad_() for t in terms(dtype_a, dtype_b))
    grad = torch.randn(a.shape)
    ours = torch.autograd.grad(widening_add(a, b), (a, b), grad)
    theirs = torch.autograd.grad(a.float() + b.float(), (a, b), grad)
    for mine, reference, term in zip(ours, theirs, (a, b)):
        assert mine.dtype == term.dtype
        assert torch.equal(mine, reference)


@pytest.mark.parametrize("dtype_b", [torch.float32, torch.bfloat16])
def test_a_row_added_to_every_row_has_torchs_bits_and_gradients(dtype_b):
    """A bias ``b`` (one row) added to a bfloat16 GEMM's product: torch's broadcast sum, and
    autograd's gradients of it (a's rounded to bfloat16, b's the column sums)."""
    a, rows = terms(torch.bfloat16, torch.float32)
    b = rows[1].to(dtype_b)
    a.requires_grad_(), b.requires_grad_()
    out, expected = widening_add(a, b), a.float() + b.float()
    assert torch.equal(out[1:], expected[1:]) and torch.equal(out.isnan(), expected.isnan())
    grad = torch.randn(a.shape)
    ours = torch.autograd.grad(out, (a, b), grad)
    theirs = torch.autograd.grad(expected, (a, b), grad)
    assert [g.dtype for g in ours] == [torch.bfloat16, dtype_b]
    assert torch.equal(ours[0], theirs[0])
    torch.testing.assert_close(ours[1], theirs[1], rtol=1e-6, atol=1e-5)  # a sum: torch's order may differ


def test_other_shapes_take_torchs_sum():
    a, b = torch.randn(5, 3), torch.randn(5, 1).bfloat16()  # a column: not the kernel's case
    assert torch.equal(widening_add(a, b), a + b.float())
