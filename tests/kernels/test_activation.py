"""The fused dropout -> LayerNorm -> ReLU kernel against torch's own ops with the same mask."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from supergcn.kernels.activation import dropout_mask, dropout_norm_relu
from supergcn.kernels.jit import numba


def layer_norm(width, affine=True):
    norm = torch.nn.LayerNorm(width, elementwise_affine=affine)
    if affine:
        torch.nn.init.uniform_(norm.weight, 0.5, 1.5)
        torch.nn.init.uniform_(norm.bias, -0.5, 0.5)
    return norm


@pytest.mark.parametrize("p", [0.0, 0.3, 0.5])
@pytest.mark.parametrize("normalize", ["affine", "plain", "none"])
def test_forward_and_gradients_equal_torch_with_the_same_mask(p, normalize):
    torch.manual_seed(0)
    x = torch.randn(700, 37, requires_grad=True)
    norm = None if normalize == "none" else layer_norm(37, affine=normalize == "affine")
    mask = torch.from_numpy(dropout_mask(1234, tuple(x.shape), p))
    dropped = x * mask / (1 - p)
    expected = F.relu(dropped if norm is None else norm(dropped))
    got = dropout_norm_relu(x, norm, p, training=True, seed=1234)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    leaves = [x] + ([norm.weight, norm.bias] if normalize == "affine" else [])
    upstream = torch.randn_like(expected)
    for mine, reference in zip(torch.autograd.grad(got, leaves, upstream),
                               torch.autograd.grad(expected, leaves, upstream)):
        torch.testing.assert_close(mine, reference, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("p", [0.0, 0.5])
@pytest.mark.parametrize("normalize", ["affine", "none"])
def test_bfloat16_rows_are_the_float32_rows_rounded_and_backward_keeps_only_bfloat16(p, normalize):
    """A bf16 run's activation: the float32 result rounded as torch rounds it, bit for bit;
    backward keeps the input and output in bfloat16 only and gives torch's float32
    gradients (of the same mask) within bfloat16's rounding of what it reads."""
    torch.manual_seed(1)
    x = torch.randn(700, 37, requires_grad=True)
    norm = None if normalize == "none" else layer_norm(37)
    exact = dropout_norm_relu(x, norm, p, training=True, seed=7)
    low = dropout_norm_relu(x, norm, p, training=True, seed=7, bfloat16=True)
    assert low.dtype == torch.bfloat16
    assert torch.equal(low.view(torch.int16), exact.to(torch.bfloat16).view(torch.int16))
    assert {t.dtype for t in low.grad_fn.saved_tensors} == {torch.bfloat16}
    upstream = torch.randn_like(exact).to(torch.bfloat16)
    leaves = [x] + ([norm.weight, norm.bias] if norm is not None else [])
    for mine, reference in zip(torch.autograd.grad(low, leaves, upstream),
                               torch.autograd.grad(exact, leaves, upstream.float())):
        assert mine.dtype == torch.float32
        assert float((mine - reference).norm() / reference.norm()) < 1e-2


@pytest.mark.parametrize("p", [0.0, 0.5])
@pytest.mark.parametrize("bfloat16", [True, False])
def test_a_bfloat16_product_and_its_bias_are_summed_as_they_are_read(p, bfloat16):
    """A hidden layer's bfloat16 GEMM product with its bias still to add: the forward has the
    bits of the float32 sum written out first (the widening kernel's) and activated; backward
    keeps the product itself, not a copy, and gives torch's gradients of
    ``relu(norm(dropout(x.float() + b)))`` with the same mask: the product's in bfloat16, the
    bias's and the norm's in float32."""
    from supergcn.kernels.widening import widening_add

    torch.manual_seed(2)
    x = (torch.randn(700, 37) * 3).bfloat16().requires_grad_()
    bias = torch.randn(37, requires_grad=True)
    norm = layer_norm(37)
    got = dropout_norm_relu(x, norm, p, training=True, seed=11, bfloat16=bfloat16, row_bias=bias)
    written_out = dropout_norm_relu(widening_add(x, bias).detach(), norm, p, training=True, seed=11, bfloat16=bfloat16)
    assert got.dtype == (torch.bfloat16 if bfloat16 else torch.float32) and torch.equal(got, written_out)
    assert got.grad_fn.saved_tensors[0].data_ptr() == x.data_ptr()

    mask = torch.from_numpy(dropout_mask(11, tuple(x.shape), p))
    expected = F.relu(norm((x.float() + bias) * mask / (1 - p)))
    upstream = torch.randn(expected.shape).bfloat16().float()
    leaves = [x, bias, norm.weight, norm.bias]
    mine = torch.autograd.grad(got, leaves, upstream.to(got.dtype))
    reference = torch.autograd.grad(expected, leaves, upstream)
    assert mine[0].dtype == torch.bfloat16
    assert float((mine[0].float() - reference[0]).norm() / reference[0].norm()) < 2 ** -8
    for ours, theirs in zip(mine[1:], reference[1:]):
        assert ours.dtype == torch.float32
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-4)


def test_a_bias_is_taken_beside_bfloat16_rows_only():
    with pytest.raises(ValueError, match="bias of 4 float32 values to bfloat16 rows only"):
        dropout_norm_relu(torch.randn(3, 4), None, 0.0, training=True, row_bias=torch.zeros(4))
    with pytest.raises(ValueError, match="bias of 4 float32"):
        dropout_norm_relu(torch.randn(3, 4).bfloat16(), None, 0.0, training=True, row_bias=torch.zeros(3))


def test_mask_drops_at_the_rate_asked_and_depends_on_the_seed_only():
    shape = (2000, 64)
    before = numba.get_num_threads()
    masks = []
    for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
        numba.set_num_threads(threads)
        masks.append(dropout_mask(7, shape, 0.25))
    numba.set_num_threads(before)
    assert np.array_equal(masks[0], masks[1])
    kept = masks[0].mean()
    # 128,000 Bernoulli(0.75) draws: the standard error is 0.0012.
    assert abs(kept - 0.75) < 0.006
    other = dropout_mask(8, shape, 0.25)
    assert 0.5 < (other == masks[0]).mean() < 0.7  # independent masks agree on 0.75² + 0.25² = 62.5 %
    # Neighbouring elements are not correlated (a weak hash would show stripes).
    assert abs(np.corrcoef(masks[0][:, :-1].ravel(), masks[0][:, 1:].ravel())[0, 1]) < 0.02


def test_evaluation_and_rate_one_need_no_mask():
    x = torch.randn(50, 8)
    norm = layer_norm(8)
    torch.testing.assert_close(dropout_norm_relu(x, norm, 0.5, training=False), F.relu(norm(x)))
    assert torch.equal(dropout_norm_relu(x, None, 1.0, training=True, seed=3), torch.zeros_like(x))


def test_nan_reaches_the_output():
    x = torch.randn(4, 8)
    x[1, 2] = float("nan")
    assert torch.isnan(dropout_norm_relu(x, layer_norm(8), 0.0, training=True)[1]).all()
    assert torch.isnan(dropout_norm_relu(x, None, 0.0, training=True)[1, 2])
    # A dropped NaN still reaches the output, as torch's x * mask / (1 - p) does.
    dropped = next(seed for seed in range(100) if not dropout_mask(seed, (4, 8), 0.5)[1, 2])
    assert torch.isnan(dropout_norm_relu(x, layer_norm(8), 0.5, training=True, seed=dropped)[1]).all()


def test_rejects_other_dtypes():
    with pytest.raises(ValueError, match="float32"):
        dropout_norm_relu(torch.randn(3, 4, dtype=torch.float64), None, 0.0, training=True)


def test_parameter_gradients_do_not_depend_on_the_thread_count():
    torch.manual_seed(1)
    x = torch.randn(5000, 16, requires_grad=True)
    norm = layer_norm(16)
    upstream = torch.randn(5000, 16)
    before = numba.get_num_threads()
    gradients = []
    for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
        numba.set_num_threads(threads)
        out = dropout_norm_relu(x, norm, 0.5, training=True, seed=5)
        gradients.append(torch.autograd.grad(out, [x, norm.weight, norm.bias], upstream))
    numba.set_num_threads(before)
    for first, second in zip(*gradients):
        assert torch.equal(first, second)


def test_rate_one_drops_everything_in_the_mask_too():
    assert not dropout_mask(3, (4, 5), 1.0).any()
