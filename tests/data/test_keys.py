import numpy as np
import pytest

from supergcn.data.keys import group_sorted, unique_sorted


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
