"""The kernel benchmark's synthetic graphs (supergcn.bench.kernels.zipf_csr)."""

import numpy as np
import pytest

from supergcn.bench.kernels import SHAPES, zipf_csr


@pytest.mark.parametrize("shape", ["papers100M-rank-8192", "synthetic-small"])
def test_zipf_graphs_repeat_no_entry_and_keep_their_degrees_within_the_columns(shape):
    """A graph's adjacency: each row's neighbours distinct and sorted, no degree above the
    nodes (the Zipf hub of papers100M-rank-8192 would be seven times them), at least one a
    row, the entries within 5 % of the shape's (rounding each degree to a whole one)."""
    num_nodes, entries = SHAPES[shape]
    indptr, indices = zipf_csr(num_nodes, entries)
    degrees = np.diff(indptr)
    assert degrees.min() >= 1 and degrees.max() == num_nodes
    assert abs(indptr[-1] - entries) <= 0.05 * entries
    keys = np.repeat(np.arange(num_nodes), degrees) * num_nodes + indices
    assert (np.diff(keys) > 0).all() and indices.min() >= 0 and indices.max() < num_nodes
    uncut = np.random.default_rng(0).zipf(2.2, num_nodes)
    assert uncut.max() / uncut.sum() * entries > num_nodes, "the uncut hub exceeds the columns"
    np.testing.assert_array_equal(zipf_csr(num_nodes, entries)[1], indices)  # a seed's graph
