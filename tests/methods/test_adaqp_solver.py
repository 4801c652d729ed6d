"""AdaQP's Problem 12 as solved by HiGHS, against enumeration and its limiting cases."""

import itertools

import numpy as np
import pytest

from supergcn.errors import SuperGCNError
from supergcn.methods.adaqp.codec import make_groups
from supergcn.methods.adaqp.solver import Groups, solve


def random_groups(seed, num_groups=7, num_ranks=3, width=16):
    rng = np.random.default_rng(seed)
    return Groups(beta=rng.gamma(1.0, 5.0, num_groups), rows=rng.integers(1, 60, num_groups),
                  sender=rng.integers(0, num_ranks, num_groups), width=width)


def brute_force(groups, weight, num_ranks, latency, bandwidth):
    """The least normalised objective over all 3^G assignments, written out from the paper."""
    def terms(bits):
        bits = np.asarray(bits, dtype=np.float64)
        variance = float((groups.beta / (2**bits - 1) ** 2).sum())
        data = groups.rows * groups.width * bits / 8
        time = max(latency + data[groups.sender == i].sum() / bandwidth for i in range(num_ranks))
        return variance, time
    v8, t8 = terms([8] * len(groups.beta))
    v2, t2 = terms([2] * len(groups.beta))
    best = np.inf
    for bits in itertools.product((2, 4, 8), repeat=len(groups.beta)):
        v, t = terms(bits)
        best = min(best, weight * (v - v8) / (v2 - v8) + (1 - weight) * (t - t2) / (t8 - t2))
    return best


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("weight", [0.0, 0.3, 0.5, 0.9, 1.0])
def test_the_solver_finds_the_enumerated_optimum(seed, weight):
    groups = random_groups(seed)
    assignment = solve(groups, weight, 3, latency_s=2e-6, bandwidth_bytes_per_s=1e9)
    assert assignment.objective == pytest.approx(brute_force(groups, weight, 3, 2e-6, 1e9), abs=1e-6)
    assert assignment.seconds > 0 and set(assignment.bits) <= {2, 4, 8}


def test_all_variance_weight_is_all_8_bits_and_none_is_all_2_bits():
    groups = random_groups(11, num_groups=40, num_ranks=4)
    assert (solve(groups, 1.0, 4).bits == 8).all()
    assert (solve(groups, 0.0, 4).bits == 2).all()


def test_ties_go_to_the_fewest_bytes():
    groups = Groups(beta=np.array([3.0, 0.0, 1.0]), rows=np.full(3, 10), sender=np.array([0, 0, 1]), width=4)
    # No spread, no variance at any width: the zero-beta group goes at 2 bits even with lambda = 1.
    assert solve(groups, 1.0, 2).bits.tolist() == [8, 2, 8]


def test_one_bandwidth_and_latency_for_all_ranks_leave_the_assignment_alone():
    groups = random_groups(5, num_groups=30, num_ranks=4)
    chosen = [solve(groups, 0.4, 4, latency, bandwidth).bits for latency, bandwidth in ((0, 1.0), (1e-5, 3e9))]
    np.testing.assert_array_equal(chosen[0], chosen[1])


def test_a_slower_rank_gets_the_narrower_widths():
    groups = Groups(beta=np.ones(4), rows=np.full(4, 10), sender=np.array([0, 0, 1, 1]), width=8)
    bits = solve(groups, 0.5, 2, bandwidth_bytes_per_s=np.array([1.0, 100.0])).bits
    assert bits[:2].max() <= bits[2:].min() and bits[:2].max() < 8


def test_lambda_outside_the_unit_interval_is_refused():
    with pytest.raises(SuperGCNError, match=r"\[0, 1\]"):
        solve(random_groups(0), 1.5, 3)


def test_groups_hold_each_peers_largest_betas_first():
    beta = np.array([1.0, 5.0, 3.0, 2.0, 9.0, 4.0, 8.0])
    group_of_row, group_beta, group_rows = make_groups(beta, np.array([5, 2]), 2)
    # Peer 0 rows by beta: 9 (row 4), 5 (row 1) | 3 (row 2), 2 (row 3) | 1 (row 0); peer 1: 8, 4.
    assert group_of_row.tolist() == [2, 0, 1, 1, 0, 3, 3]
    assert group_beta.tolist() == [14.0, 5.0, 1.0, 12.0]
    assert group_rows.tolist() == [2, 2, 1, 2]


def test_many_groups_are_solved_without_dense_constraints():
    """5,000 groups: dense G x 3G constraints would take 600 MB (float64); sparse ones a
    few MB. The answer keeps every group on one width of the three."""
    import tracemalloc

    groups = random_groups(0, num_groups=5_000, num_ranks=8)
    tracemalloc.start()
    assignment = solve(groups, 0.5, 8, latency_s=2e-6, bandwidth_bytes_per_s=1e9)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 * 2**20, f"{peak / 2**20:.0f} MiB traced"
    assert len(assignment.bits) == 5_000 and set(assignment.bits.tolist()) <= {2, 4, 8}
