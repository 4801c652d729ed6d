"""The first layer's factored input (supergcn/models/inputs.py) against the written-out one."""

from pathlib import Path

import pytest
import torch

from supergcn.models.inputs import LabelledInput
from supergcn.testing.ops import StandInOps
from supergcn.train.gnn import GNN, activate

from conftest import run_rank_job


@pytest.mark.parametrize("ranks", [1, 3])
def test_factored_label_input_equals_the_written_out_one(ranks):
    run_rank_job(Path(__file__).with_name("label_input_job.py"), ranks, timeout=180)


class RowMixing(StandInOps):
    """Aggregation stand-in: a linear map that mixes rows (each takes half its neighbour's)."""

    def __init__(self, n=50):
        super().__init__(n)

    def aggregate(self, x):
        return 0.5 * x.roll(1, 0)


def saved_for_backward(forward) -> list[torch.Tensor]:
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        forward().sum().backward()
    return saved


@pytest.mark.parametrize("input_norm", [False, True])
@pytest.mark.parametrize("model", ["sage", "gcn"])
def test_a_first_layer_that_transforms_first_differentiates_no_input_sized_tensor(model, input_norm):
    """Where the first layer transforms before it aggregates (hidden < F), backward needs
    no n x F gradient: nothing of the input's size that requires a gradient is saved. The
    written-out X' (PyG's MaskLabel formulation) saves one, so the check can tell them apart."""
    n, width = 50, 40
    torch.manual_seed(0)
    gnn = GNN(model, width, 16, 3, num_layers=2, dropout=0.0, label_propagation=True, input_norm=input_norm)
    x, nodes = torch.randn(n, width), torch.tensor([3, 7, 20, 21])
    labels = torch.tensor([0, 2, 2, 1])

    def input_sized(saved):
        return [t for t in saved if t.shape == (n, width) and t.requires_grad]

    assert not input_sized(saved_for_backward(lambda: gnn(x, RowMixing(), nodes, labels)))
    assert gnn.label_embedding.weight.grad[labels].abs().sum() > 0

    def written_out():
        h = x.index_add(0, nodes, gnn.label_embedding(labels))
        h = h if gnn.input_norm is None else gnn.input_norm(h)
        hidden = activate(gnn.convs[0](h, RowMixing()), gnn.norms[0], gnn.dropout, gnn.training)
        return gnn.convs[1](hidden, RowMixing())
    assert input_sized(saved_for_backward(written_out))


def test_the_input_norm_standardises_the_features_once_while_they_are_unchanged():
    """X_hat is reused across passes over the same features, and recomputed when they are
    edited in place: the output always equals a fresh model's (one that never cached)."""
    torch.manual_seed(0)
    gnn = GNN("sage", 40, 16, 3, num_layers=2, dropout=0.0, label_propagation=True, input_norm=True)
    x, nodes, labels = torch.randn(50, 40), torch.tensor([3, 7]), torch.tensor([0, 2])

    def fresh_output():
        fresh = GNN("sage", 40, 16, 3, num_layers=2, dropout=0.0, label_propagation=True, input_norm=True)
        fresh.load_state_dict(gnn.state_dict())
        return fresh(x, RowMixing(), nodes, labels)

    first = gnn(x, RowMixing(), nodes, labels)
    standardised = gnn.input_norm.standardised_features(x)
    torch.testing.assert_close(gnn(x, RowMixing(), nodes, labels), first)
    assert gnn.input_norm.standardised_features(x) is standardised
    torch.testing.assert_close(standardised, torch.nn.functional.layer_norm(x, (40,)))

    x[5, :20].add_(2.0)  # an in-place edit of the features (not an affine map of the row, which X_hat ignores)
    torch.testing.assert_close(gnn(x, RowMixing(), nodes, labels), fresh_output())
    assert gnn.input_norm.standardised_features(x) is not standardised


def test_the_label_parts_gradient_has_the_same_bits_every_run():
    """The labels repeat (a few classes over many label rows): the label part's gradient must
    add them in a fixed order, on two threads as on one, not in whatever order the threads
    take (float32 indexing's backward adds with atomics past 32,768 elements)."""
    generator = torch.Generator().manual_seed(0)
    n, width, out, classes = 40_000, 16, 128, 5
    x, weight = torch.randn(n, width, generator=generator), torch.randn(out, width, generator=generator)
    nodes = torch.randperm(n, generator=generator)[:30_000]
    labels, grad = torch.randint(0, classes, (30_000,), generator=generator), torch.randn(n, out, generator=generator)
    embedding = torch.nn.Embedding(classes, width)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        grads = []
        for _ in range(4):
            embedding.weight.grad = None
            LabelledInput(x, None, embedding, nodes, labels).project(weight, torch.float32).backward(grad)
            grads.append(embedding.weight.grad.clone())
    finally:
        torch.set_num_threads(threads)
    assert all(torch.equal(grads[0].view(torch.int32), g.view(torch.int32)) for g in grads[1:])
    label_rows = grad[nodes].double() @ weight.double()  # dL/d(E[y]) of each label row, E W^T's chain rule
    reference = torch.zeros(classes, width, dtype=torch.float64).index_add_(0, labels, label_rows)
    torch.testing.assert_close(grads[0].double(), reference, rtol=1e-4, atol=1e-3)
