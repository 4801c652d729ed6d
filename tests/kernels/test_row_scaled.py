"""GCN's row-scaled steps on bfloat16 rows (:mod:`supergcn.kernels.row_scaled`) against the
torch expressions they replace: the same bits forward and the gradients autograd gives,
with infinities (0 x inf is NaN), values past bfloat16's range and rows with and without
a self loop."""

import pytest
import torch

from supergcn.kernels.row_scaled import scaled_rows, self_loops_added


def case(rows=517, width=37):
    torch.manual_seed(rows)
    x = (torch.randn(rows, width) * 100).bfloat16()
    x[0, :3] = torch.tensor([float("inf"), -float("inf"), 3e38]).bfloat16()
    aggregated = torch.randn(rows, width) * 10
    aggregated[1, 0] = float("inf")
    missing = (torch.rand(rows) < 0.5).float()
    missing[0] = 0.0  # 0 x inf: NaN, as torch gives
    scale = torch.rand(rows) * 4
    scale[2] = 2.0**-130  # into the subnormals
    return x, aggregated, missing, scale


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal bits, NaN equal to NaN."""
    nan = a.isnan()
    return torch.equal(nan, b.isnan()) and torch.equal(a[~nan], b[~nan]) and a.dtype == b.dtype


def test_scaled_rows_are_torchs_expression_both_ways():
    x, _, _, scale = case()
    x.requires_grad_()
    ours = scaled_rows(x, scale)
    theirs = (x * scale[:, None]).to(x.dtype)
    assert same(ours, theirs)
    grad = torch.randn(ours.shape).bfloat16()
    assert same(torch.autograd.grad(ours, x, grad)[0], torch.autograd.grad(theirs, x, grad)[0])


def test_self_loops_added_is_torchs_expression_both_ways():
    x, aggregated, missing, scale = case()
    x.requires_grad_(), aggregated.requires_grad_()
    ours = self_loops_added(aggregated, x, missing, scale)
    theirs = aggregated + missing[:, None] * x * scale[:, None]
    assert ours.isnan().any() and same(ours, theirs)
    grad = torch.randn(ours.shape) * 1e3
    grad[3, 0] = float("inf")
    for mine, reference in zip(torch.autograd.grad(ours, (aggregated, x), grad),
                               torch.autograd.grad(theirs, (aggregated, x), grad)):
        assert same(mine, reference)


@pytest.mark.parametrize(("call", "problem"), [
    (lambda: scaled_rows(torch.ones(4, 3), torch.ones(4)), "2-D bfloat16 rows"),
    (lambda: scaled_rows(torch.ones(4, 3).bfloat16(), torch.ones(3)), "one float32 factor per row"),
    (lambda: scaled_rows(torch.ones(4, 3).bfloat16(), torch.ones(4, requires_grad=True)), "without a gradient"),
    (lambda: self_loops_added(torch.ones(4, 3).bfloat16(), torch.ones(4, 3).bfloat16(), torch.ones(4),
                              torch.ones(4)), "adds to float32 rows"),
    (lambda: self_loops_added(torch.ones(4, 2), torch.ones(4, 3).bfloat16(), torch.ones(4), torch.ones(4)),
     "adds to float32 rows"),
])
def test_bad_arguments_are_refused_by_name(call, problem):
    with pytest.raises(ValueError, match=problem):
        call()

