"""Index arithmetic over blocks and CSRs against the Python loops it replaces."""

import numpy as np
import pytest
import scipy.sparse as sp

from supergcn.kernels.ranges import block_starts, concatenated_ranges, csr_pointers


@pytest.mark.parametrize("seed", range(3))
def test_blocks_and_ranges_are_the_loops_they_replace(seed):
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 5, 9)
    starts, sizes = rng.integers(0, 50, 9), rng.integers(0, 4, 9)
    assert block_starts(counts).tolist() == [int(counts[:k].sum()) for k in range(len(counts))]
    expected = [i for s, n in zip(starts, sizes) for i in range(s, s + n)]
    assert concatenated_ranges(starts, sizes).tolist() == expected


@pytest.mark.parametrize("seed", range(3))
def test_csr_pointers_are_scipys(seed):
    rng = np.random.default_rng(seed)
    rows, num_rows = rng.integers(0, 7, 30), 9  # the last rows have no entries
    pointers = csr_pointers(rows, num_rows)
    assert pointers.dtype == np.int64 and len(pointers) == num_rows + 1
    assert np.diff(pointers).tolist() == np.bincount(rows, minlength=num_rows).tolist()
    assert pointers[-1] == len(rows)
    # the same row boundaries as scipy's CSR of the same entries, each kept (no duplicates summed)
    unsummed = sp.csr_matrix((np.ones(len(rows)), (rows, np.arange(len(rows)))), shape=(num_rows, len(rows)))
    assert pointers.tolist() == unsummed.indptr.tolist()
