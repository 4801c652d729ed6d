"""GAT's card, by hand (its layer is held to PyG's GATConv and its bytes to these costs in
tests/train/test_models.py), and its torch path's gradient bits, run after run."""

import numpy as np
import torch

from supergcn.models import card
from supergcn.models.gat.block_attention import BlockAttention
from supergcn.plan.costs import row_costs
from supergcn.train.config import TrainConfig

GAT = card("gat")


def test_it_always_projects_first_and_exchanges_all_heads():
    # 3 layers, hidden 256 in 4 heads, 40 classes: rows of 256, 256 and 4 x 40 = 160 values.
    for aggregate_first in (False, True):
        layers = GAT.exchanges(100, 256, 40, 3, heads=4, aggregate_first=aggregate_first)
        assert [(layer.width, layer.backward) for layer in layers] == [(256, True), (256, True), (160, True)]


def test_row_costs_by_hand():
    data = 2 * 32 * (256 + 256 + 160)   # float32, forward and backward
    scalars = 2 * 4 * 32 * 3            # H float32 per row, layer and direction
    assert row_costs(card("gat"), 3, 256, 4, 40) == (data + 3 * scalars, data + scalars)
    # Int2 with bfloat16 parameters: 2 bits a value and two 16-bit parameters a row.
    data = 2 * ((256 + 256 + 160) * 2 + 3 * 2 * 16)
    assert row_costs(card("gat"), 3, 256, 4, 40, bits=2) == (data + 3 * scalars, data + scalars)
    assert GAT.weighted_cover


def test_heads_must_divide_the_hidden_width():
    config = TrainConfig(graph="g", partition="p", plan="q", out="o", model="gat", hidden=30, heads=4)
    assert any("GAT's 4 heads are concatenated into the hidden width 30" in problem for problem in config.conflicts())
    assert not TrainConfig(graph="g", partition="p", plan="q", out="o", model="gat", hidden=32,
                           heads=4).conflicts()
    # a model without heads reads neither option
    assert not TrainConfig(graph="g", partition="p", plan="q", out="o", model="sage", hidden=30,
                           heads=4).conflicts()


def test_attention_on_torch_has_the_same_gradient_bits_every_run():
    """The torch path (attention dropout, ``--kernel torch``) gathers each edge's ends, which
    repeat: on two threads its gradient must still add them in a fixed order (float32
    indexing's backward adds with atomics past 32,768 elements), and it agrees with the
    fused kernels."""
    generator = np.random.default_rng(0)
    num_dst, num_src, heads, width, degree = 2_000, 3_000, 4, 16, 12
    indptr = np.arange(0, (num_dst + 1) * degree, degree)
    indices = generator.integers(0, num_src, num_dst * degree)
    inputs = [torch.from_numpy(generator.standard_normal(shape).astype(np.float32))
              for shape in ((num_src, heads, width), (num_src, heads), (num_dst, heads), (num_dst, heads, width))]
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        grads = {}
        for kernel in ("torch", "torch", "torch", "numba"):
            z, source, destination = (t.clone().requires_grad_() for t in inputs[:3])
            BlockAttention(indptr, indices, num_src, kernel)(z, source, destination, 0).backward(inputs[3])
            grads.setdefault(kernel, []).append([z.grad, source.grad, destination.grad])
    finally:
        torch.set_num_threads(threads)
    first, *others = grads["torch"]
    for other in others:
        assert all(torch.equal(a.view(torch.int32), b.view(torch.int32)) for a, b in zip(first, other))
    for ours, fused in zip(first, grads["numba"][0]):
        torch.testing.assert_close(ours, fused, rtol=1e-4, atol=1e-5)
