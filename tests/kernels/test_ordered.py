"""The fixed-order sums against hand-worked cases, against their numpy statement
(reference_sum) to the last bit, and the entry-order reference of the target matrix
against a case where order decides the result."""

import numpy as np
import pytest

from supergcn.kernels.jit import njit
from supergcn.kernels.ordered import LANES, ordered_dot, ordered_squares, ordered_sum, reference_sum
from supergcn.testing.targets import entry_order_sum


@njit
def _sum(values):
    return ordered_sum(values)


@njit
def _dot(left, right):
    return ordered_dot(left, right)


@njit
def _squares(values, centre):
    return ordered_squares(values, centre)


def test_hand_worked_order_decides_the_sum():
    """Value f goes to partial f mod 16: 1e16 and -1e16 share partial 0 and cancel before
    the 1 of partial 1 is folded in (a sum left to right would lose the 1 to 1e16)."""
    values = np.zeros(LANES + 1)
    values[0], values[1], values[LANES] = 1e16, 1.0, -1e16
    assert _sum(values) == 1.0
    assert sum(values.tolist()) == 0.0  # left to right: (1e16 + 1) rounds back to 1e16
    # Partials 0 and 8 fold first: 1e16 in partial 0, -1e16 in partial 8 cancel, 1 survives.
    values = np.zeros(LANES)
    values[0], values[1], values[LANES // 2] = 1e16, 1.0, -1e16
    assert _sum(values) == 1.0


@pytest.mark.parametrize("n", [0, 1, 5, LANES - 1, LANES, LANES + 1, 37, 256, 1000])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sums_equal_their_numpy_statement_to_the_last_bit(n, dtype):
    rng = np.random.default_rng(n)
    left = (rng.standard_normal(n) * 10 ** rng.uniform(-3, 3, n)).astype(dtype)
    right = rng.standard_normal(n).astype(dtype)
    assert _sum(left) == reference_sum(left.astype(np.float64))
    assert _dot(left, right) == reference_sum((left * right).astype(np.float64))  # products rounded in dtype
    assert _squares(left, 0.25) == reference_sum((left.astype(np.float64) - 0.25) ** 2)
    np.testing.assert_allclose(_dot(left, right), np.dot(left.astype(np.float64), right), rtol=1e-5, atol=1e-5)


def test_entry_order_reference_follows_the_csr_order():
    """Row 0 is [1e8, 1, -1e8] in float32: in entry order the 1 is lost to 1e8 (ulp 8), so
    the row sums to 0, not 1. Row 1 is -1e8 + 1: the 1 is lost again. Weighted, each product
    rounds before it is added: 2e8 + 1 rounds to 2e8, less 1e8 is 1e8; 0.5 * -1e8 + 2 * 1 is
    -49999998, a tie between -5e7 and -49999996 that rounds to the even -5e7."""
    indptr, indices = np.array([0, 3, 5]), np.array([0, 1, 2, 2, 1])
    x = np.array([[1e8], [1.0], [-1e8]], np.float32)
    assert entry_order_sum(indptr, indices, None, x)[:, 0].tolist() == [0.0, -1e8]
    weights = np.array([2, 1, 1, 0.5, 2], np.float32)
    assert entry_order_sum(indptr, indices, weights, x)[:, 0].tolist() == [1e8, -5e7]


def test_a_read_only_row_sums_as_a_writable_one():
    left = np.arange(40, dtype=np.float32)
    right = left.copy()
    right.flags.writeable = False
    assert _dot(left, right) == _dot(left, left.copy()) == reference_sum((left * left).astype(np.float64))


def test_integer_rows_are_refused():
    with pytest.raises(Exception, match="float32 or float64"):
        _sum(np.ones(5, np.int64))
