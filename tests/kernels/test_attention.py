"""The fused attention kernels against autograd: their forward against the softmax written
out in torch, their backward against finite differences (torch.autograd.gradcheck, float64)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from supergcn.kernels.attention import AttentionCsr, FusedAttention, Progress

SLOPE = 0.2


def random_case(seed, normalise, dtype=torch.float64):
    rng = np.random.default_rng(seed)
    rows, sources, heads, width = 7, 9, 3, 5
    entries = rng.integers(1, 25)
    entry_rows, entry_sources = rng.integers(0, rows, entries), rng.integers(0, sources, entries)
    if normalise:  # every row has an entry (a self loop), as the owner's rows do
        entry_rows, entry_sources = np.concatenate([entry_rows, np.arange(rows)]), np.concatenate(
            [entry_sources, np.arange(rows)])
    pieces = rng.integers(0, rows, 6) if normalise else np.empty(0, dtype=np.int64)
    csr = AttentionCsr(entry_rows, entry_sources, rows, sources, pieces if normalise else None)

    def tensor(*shape):
        return torch.tensor(rng.standard_normal(shape), dtype=dtype, requires_grad=True)
    inputs = (tensor(sources, heads, width), tensor(sources, heads), tensor(rows, heads),
              tensor(len(pieces), heads, width), torch.tensor(rng.uniform(0.5, 2, (len(pieces), heads)), dtype=dtype,
                                                              requires_grad=True),
              torch.tensor(rng.standard_normal((len(pieces), heads)), dtype=dtype))
    return csr, inputs, (entry_rows, entry_sources, pieces)


def written_out(inputs, entries, rows, normalise):
    """The module docstring's sums, edge by edge with torch (no maxima: exp directly)."""
    z, source_score, destination_score, piece_rows, piece_sums, piece_maxima = inputs
    entry_rows, entry_sources, pieces = (torch.from_numpy(np.asarray(a, dtype=np.int64)) for a in entries)
    weights = torch.exp(F.leaky_relu(destination_score[entry_rows] + source_score[entry_sources], SLOPE))
    shares = torch.exp(piece_maxima)
    out = (z.new_zeros((rows, *z.shape[1:])).index_add(0, entry_rows, weights[..., None] * z[entry_sources])
           .index_add(0, pieces, shares[..., None] * piece_rows))
    sums = weights.new_zeros((rows, z.shape[1])).index_add(0, entry_rows, weights).index_add(0, pieces,
                                                                                             shares * piece_sums)
    return (out / sums[..., None], sums) if normalise else (out, sums)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("normalise", [True, False])
def test_forward_is_the_written_out_softmax(seed, normalise):
    csr, inputs, entries = random_case(seed, normalise)
    out, maxima, sums = FusedAttention.apply(*inputs, csr, SLOPE, normalise)
    expected_out, expected_sums = written_out(inputs, entries, csr.num_rows, normalise)
    # A state is relative to its row's maximum: S exp(M) is the written-out sum (and so is
    # r exp(M) an unnormalised row).
    scale = torch.ones_like(maxima) if normalise else torch.exp(maxima)
    np.testing.assert_allclose((out * scale[..., None]).detach(), expected_out.detach(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose((sums * torch.exp(maxima)).detach(), expected_sums.detach(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("normalise", [True, False])
def test_backward_is_the_derivative(seed, normalise):
    csr, inputs, _ = random_case(seed, normalise)
    varied = inputs[:5] if normalise else inputs[:3]  # a sender's rows have no pieces

    def differentiable(*tensors):
        out, _, sums = FusedAttention.apply(*tensors, *inputs[len(tensors):], csr, SLOPE, normalise)
        # An unnormalised state is relative to its maximum, which carries no gradient: only
        # what does not depend on the maximum (as the merge of the states) is differentiable.
        return out if normalise else out / sums.clamp(min=1e-300)[..., None]
    assert torch.autograd.gradcheck(differentiable, varied, eps=1e-6, atol=1e-6)


def test_float32_matches_float64():
    csr, inputs, _ = random_case(9, True)
    single = [x.detach().float().requires_grad_(x.requires_grad) for x in inputs]
    out64 = FusedAttention.apply(*inputs, csr, SLOPE, True)[0]
    out32 = FusedAttention.apply(*single, csr, SLOPE, True)[0]
    np.testing.assert_allclose(out32.detach(), out64.detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("pieces", [2, 3, 50])
@pytest.mark.parametrize("normalise", [True, False])
def test_pieces_with_polls_between_compute_the_same(pieces, normalise):
    """Cut into row (and, backward, source) ranges with a poll between, as beside an
    exchange in flight, the kernels give the very same values and gradients."""
    csr, inputs, _ = random_case(5, normalise)
    polls = []
    results = []
    for progress in (Progress(), Progress(pieces, lambda: polls.append(1))):
        tensors = [x.detach().clone().requires_grad_(x.requires_grad) for x in inputs]
        out, _, sums = FusedAttention.apply(*tensors, csr, SLOPE, normalise, progress)
        (out.sum() + sums.sum()).backward()
        results.append([out, sums, *(x.grad for x in tensors if x.requires_grad)])
    for one, cut in zip(*results):
        assert torch.equal(one, cut)
    forward_ranges = Progress(pieces).ranges(csr.indptr)
    backward_ranges = Progress(pieces).ranges(csr.transpose_indptr)
    assert len(polls) == 2 * len(forward_ranges) + len(backward_ranges) > 3


@pytest.mark.parametrize("pieces", [1, 2, 4, 7])
def test_progress_ranges_cover_every_row_once_in_order(pieces):
    indptr = np.concatenate([[0], np.cumsum(np.random.default_rng(pieces).integers(0, 9, 40))])
    ranges = Progress(pieces).ranges(indptr)
    assert ranges[0][0] == 0 and ranges[-1][1] == 40
    assert all(a < b for a, b in ranges) and all(b == c for (_, b), (c, _) in zip(ranges, ranges[1:]))
    assert len(ranges) <= pieces
    # about equal entries: no piece holds more than its share plus the largest row
    counts = [indptr[b] - indptr[a] for a, b in ranges]
    assert max(counts) <= indptr[-1] / pieces + np.diff(indptr).max()
