"""The full-batch step's loss: its rows selected as torch's indexing selects them."""

import torch

from supergcn.train.steps import distinct_rows


def test_distinct_rows_give_indexings_values_and_gradient_bits():
    generator = torch.Generator().manual_seed(0)
    rows = torch.randn(50, 7, generator=generator, dtype=torch.float64).float()
    index = torch.randperm(50, generator=generator)[:31]
    grad = torch.randn(31, 7, generator=generator)
    grad[3] = 0.0  # a zero row keeps +0.0 either way
    ours, theirs = rows.clone().requires_grad_(), rows.clone().requires_grad_()
    picked, reference = distinct_rows(ours, index), theirs[index]
    assert torch.equal(picked.view(torch.int32), reference.view(torch.int32))
    picked.backward(grad)
    reference.backward(grad)
    assert torch.equal(ours.grad.view(torch.int32), theirs.grad.view(torch.int32))
    untouched = torch.ones(50, dtype=torch.bool)
    untouched[index] = False
    assert untouched.any() and ours.grad[untouched].eq(0).all()


def test_the_loss_of_distinct_rows_has_torchs_gradient_through_log_softmax():
    generator = torch.Generator().manual_seed(1)
    logits = torch.randn(40, 5, generator=generator)
    index, labels = torch.randperm(40, generator=generator)[:17], torch.randint(0, 5, (40,), generator=generator)
    grads = []
    for select in (distinct_rows, lambda rows, nodes: rows[nodes]):
        x = logits.clone().requires_grad_()
        torch.nn.functional.nll_loss(select(torch.log_softmax(x, -1), index), labels[index], reduction="sum").backward()
        grads.append(x.grad)
    assert torch.equal(grads[0].view(torch.int32), grads[1].view(torch.int32))
