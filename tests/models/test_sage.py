"""GraphSAGE's card, by hand, and its bfloat16 layer written out (its float32 layer is held
to PyG's SAGEConv in tests/train/test_models.py)."""

import pytest

from supergcn.models import card

SAGE = card("sage")


def test_it_transforms_first_only_where_the_output_is_narrower():
    assert SAGE.layer_transforms_first(16, 8) and not SAGE.layer_transforms_first(8, 8)
    assert not SAGE.layer_transforms_first(8, 16)
    assert not SAGE.layer_transforms_first(16, 8, aggregate_first=True)


def test_its_exchanges_by_hand():
    # 16 -> 8 -> 8 -> 4: layer 1 projects first (8-wide rows, a gradient back); layer 2
    # aggregates its 8-wide input; layer 3 projects to 4.
    layers = SAGE.exchanges(16, 8, 4, 3)
    assert [(layer.width, layer.backward) for layer in layers] == [(8, True), (8, True), (4, True)]
    # 4 -> 8: layer 1 aggregates the input, which needs no gradient
    assert [(layer.width, layer.backward) for layer in SAGE.exchanges(4, 8, 2, 3)] == [(4, False), (8, True),
                                                                                      (2, True)]


def test_a_pre_and_a_post_row_cost_the_same_and_distgnn_applies():
    assert not SAGE.weighted_cover and SAGE.delayable


class DenseMean:
    """The mean aggregation of a small random graph as a dense row-normalised matrix, summed
    in float32 whatever the rows' type (as a rank's gathers sum bfloat16 rows)."""

    def __init__(self, n: int, seed: int = 0):
        import torch

        generator = torch.Generator().manual_seed(seed)
        adjacency = (torch.rand(n, n, generator=generator) < 0.2).float()
        self.matrix = adjacency / adjacency.sum(1, keepdim=True).clamp(min=1)

    def mean(self, x):
        return self.matrix @ x.float()

    def destinations(self, x):
        return x


@pytest.mark.parametrize(("in_dim", "out_dim"), [(24, 40), (40, 24)])
def test_in_bf16_both_projections_are_one_gemm_over_the_concatenation(in_dim, out_dim):
    """GraphSAGE's ``W · CONCAT(mean(h), h)`` as one bfloat16 GEMM (the layer's module
    docstring), written out here with torch: aggregating first, ``[mean(h) | h]`` against
    ``[W_n | W_s]`` with one rounding of the sum and the bias added in float32; projecting
    first (narrower output), ``h [W_n; W_s]^T`` whose first half is aggregated. Same bits;
    and within bfloat16's rounding of the float32 layer (PyG's formula), gradients too. A
    hidden layer aggregating first leaves the bias to the activation (``BiasedProduct``)."""
    import torch

    from supergcn.kernels.widening import widening_add
    from supergcn.models.inputs import BiasedProduct
    from supergcn.models.sage.layer import Layer

    torch.manual_seed(in_dim)
    ops = DenseMean(50)
    exact = Layer(in_dim, out_dim)
    low, hidden = (Layer(in_dim, out_dim, last=last, dense_dtype=torch.bfloat16) for last in (True, False))
    low.load_state_dict(exact.state_dict()), hidden.load_state_dict(exact.state_dict())
    assert low.transform_first == (out_dim < in_dim)
    x = torch.randn(50, in_dim).bfloat16()
    w_n, w_s, b = exact.lin_neigh.weight.detach(), exact.lin_self.weight.detach(), exact.lin_neigh.bias.detach()
    if low.transform_first:
        both = x @ torch.cat([w_n, w_s]).bfloat16().t()
        expected = ops.mean(both[:, :out_dim]) + b + both[:, out_dim:].float()
    else:
        stacked = torch.cat([ops.mean(x).bfloat16(), x], dim=1)
        expected = (stacked @ torch.cat([w_n, w_s], dim=1).bfloat16().t()).float() + b
    got = low(x.clone(), ops).detach()
    assert got.dtype == torch.float32 and torch.equal(got, expected)
    left = hidden(x.clone(), ops)
    if not low.transform_first:
        assert isinstance(left, BiasedProduct) and left.bias is hidden.lin_neigh.bias
        left = widening_add(left.product, left.bias)
    assert torch.equal(left.detach(), expected)

    reference_input, input_ = x.float().requires_grad_(), x.clone().requires_grad_()
    reference = exact(reference_input, ops)
    grad = torch.randn(reference.shape)
    expected_grads = torch.autograd.grad(reference, [reference_input, *exact.parameters()], grad)
    grads = torch.autograd.grad(low(input_, ops), [input_, *low.parameters()], grad)
    assert float((got - reference.detach()).norm() / reference.detach().norm()) < 2 ** -7
    for mine, theirs in zip(grads, expected_grads):
        assert float((mine.float() - theirs).norm() / theirs.norm()) < 2 ** -6
