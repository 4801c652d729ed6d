import numpy as np
import pytest

from supergcn.data.csr import symmetric_csr
from supergcn.data.datasets import prepare_dataset
from supergcn.data.keys import MAX_PAIR_KEYED_NODES, check_pair_keys_fit, group_sorted, unique_sorted
from supergcn.errors import SuperGCNError


@pytest.mark.parametrize("size", [0, 1, 2, 1000])
def test_unique_sorted_matches_numpy_unique(size):
    keys = np.random.default_rng(size).integers(-50, 50, size) * np.int64(10**11)
    np.testing.assert_array_equal(unique_sorted(keys), np.unique(keys))


@pytest.mark.parametrize("size", [0, 1, 2, 1000])
def test_group_sorted_matches_numpy_unique_with_inverse(size):
    keys = np.sort(np.random.default_rng(size).integers(0, 40, size))
    values, inverse = group_sorted(keys)
    expected_values, expected_inverse = np.unique(keys, return_inverse=True)
    np.testing.assert_array_equal(values, expected_values)
    np.testing.assert_array_equal(inverse, expected_inverse)


def test_pair_keys_are_refused_where_they_would_wrap():
    """At MAX_PAIR_KEYED_NODES nodes the largest key (n - 2) * n + (n - 1) fits an int64
    (Python's integers hold its exact value); at 2^32 (R-MAT scale 32) it does not, and is refused."""
    n = MAX_PAIR_KEYED_NODES
    assert (n - 2) * n + (n - 1) <= 2**63 - 1 < (2**32 - 2) * 2**32 + (2**32 - 1)
    check_pair_keys_fit(n)
    with pytest.raises(SuperGCNError, match="keyed min \\* n \\+ max in 64 bits"):
        check_pair_keys_fit(n + 1)
    with pytest.raises(SuperGCNError, match="R-MAT: scale 31"):
        symmetric_csr(np.array([0]), np.array([1]), 2**33)
    assert 2**31 <= n < 2**32  # so R-MAT stops at scale 31
    with pytest.raises(SuperGCNError, match="scale 32 is out of range: 2\\^32 nodes' edge keys overflow"):
        prepare_dataset("rmat-32")
