"""CSR arrays built a block at a time: the symmetric CSR of an edge list against scipy."""

import numpy as np
import pytest
import scipy.sparse as sp

from supergcn.data.csr import symmetric_csr
from supergcn.errors import SuperGCNError

from conftest import awkward_edge_list


def test_symmetric_csr_matches_a_set_of_undirected_edges():
    src, dst = awkward_edge_list(200)
    indptr, indices = symmetric_csr(src, dst, 200)
    expected = {(int(a), int(b)) for a, b in zip(src, dst)} | {(int(b), int(a)) for a, b in zip(src, dst)}
    rows = np.repeat(np.arange(200), np.diff(indptr))
    got = list(zip(rows.tolist(), indices.tolist()))
    assert len(got) == len(set(got)), "duplicates survived"
    assert set(got) == expected
    assert all(np.all(np.diff(indices[indptr[v]:indptr[v + 1]]) > 0) for v in range(200)), "rows not sorted"
    assert np.all(np.diff(indptr)[-20:] == 0), "isolated nodes gained edges"


@pytest.mark.parametrize("block", [3, 1 << 24])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_symmetric_csr_equals_scipys_conversion_of_both_directions(monkeypatch, block, dtype):
    """The key-and-fill construction against scipy's COO-to-CSR of the edges and their
    reverses (duplicates summed, then made 0/1), whatever the input's integer type and
    however the keys are built in blocks."""
    import supergcn.data.csr as csr_module

    monkeypatch.setattr(csr_module, "ROW_BLOCK_ENTRIES", block)
    rng = np.random.default_rng(5)
    n = 500
    src, dst = rng.integers(0, n, 4000).astype(dtype), rng.integers(0, n, 4000).astype(dtype)
    src[:30] = dst[:30]  # self loops, some of them repeated
    src[30:60] = src[:30]
    dst[30:60] = dst[:30]
    indptr, indices = symmetric_csr(src, dst, n)
    both = sp.coo_matrix((np.ones(8000), (np.concatenate([src, dst]), np.concatenate([dst, src]))), shape=(n, n))
    expected = both.tocsr()
    expected.sum_duplicates()
    expected.sort_indices()
    assert indptr.dtype == np.int64 and indices.dtype == np.int32
    np.testing.assert_array_equal(indptr, expected.indptr)
    np.testing.assert_array_equal(indices, expected.indices)


def test_edges_outside_the_node_range_are_refused():
    with pytest.raises(SuperGCNError, match="outside"):
        symmetric_csr(np.array([0, 5]), np.array([1, 2]), 5)
