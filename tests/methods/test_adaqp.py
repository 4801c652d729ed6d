"""AdaQP's adaptive bit widths in training: the wire, the limiting assignments, the metrics."""

from pathlib import Path

import pytest

from supergcn.train.metrics import read_metrics

from conftest import run_mpi, run_rank_job


def test_a_mixed_assignment_sends_its_bytes_and_is_unbiased():
    run_rank_job(Path(__file__).with_name("adaqp_job.py"), 3)


@pytest.fixture(scope="module")
def trained(tiny_plans, tmp_path_factory):
    """``trained(*options)``: the epochs of 5 at P = 2 on the hybrid plan with ``options``,
    each set of options trained once in the module (both cases compare with Int8's)."""
    root, runs = tmp_path_factory.mktemp("adaqp"), {}

    def train(*options):
        if options not in runs:
            out = root / f"{len(runs)}.jsonl"
            result = run_mpi(2, "train", "--graph", tiny_plans / "graph", "--partition", tiny_plans / "P2", "--plan",
                             tiny_plans / "P2-hybrid", "--out", out, "--hidden", 16, "--epochs", 5, *options)
            assert result.returncode == 0, result.stderr
            runs[options] = read_metrics(out)[1]
        return runs[options]
    return train


@pytest.mark.parametrize("weight, uniform_bits", [(1.0, 8), (0.0, 2)])
def test_lambda_one_and_zero_send_as_uniform_int8_and_int2(trained, weight, uniform_bits):
    adaptive = trained("--bits", "adaptive", "--adaptive-weight", weight, "--adaptive-period", 3)
    uniform = trained("--bits", uniform_bits)
    assigned = [e["bit_assignment"] for e in adaptive if "bit_assignment" in e]
    # Traced: epochs 1 and 4; not 5, the last, whose assignment nothing would use.
    assert [e["epoch"] for e in adaptive if "bit_assignment" in e] == [1, 4]
    for assignment in assigned:
        # backward0 too where layer 0 transforms before it aggregates (the input is wider than 16).
        assert set(assignment["exchanges"]) >= {"forward0", "forward1", "forward2", "backward1", "backward2"}
        for exchange in assignment["exchanges"].values():
            rows = exchange["rows_per_bits"]
            assert exchange["solve_seconds"] > 0 and rows["4"] == 0
            # Rows whose values are all equal (zero gradients) have no variance at any width.
            assert rows[str(uniform_bits)] >= sum(rows.values()) - exchange["rows_without_spread"]
    # Epoch 1 runs at AdaQP's initial 8 bits; from epoch 2 on the assignment's bytes.
    int8 = trained("--bits", 8)
    assert adaptive[0]["bytes"]["sent_total"] == int8[0]["bytes"]["sent_total"]
    sent = [[e["bytes"]["sent_total"] for e in run[1:]] for run in (adaptive, uniform)]
    assert sent[0] == sent[1] if uniform_bits == 2 else all(a <= u for a, u in zip(*sent))


def test_adaqp_rounds_stochastically_as_published_unless_told_otherwise(trained):
    """``--rounding auto`` (the default) rounds an AdaQP run's rows stochastically, as AdaQP
    does: the run is the explicitly stochastic one's, loss for loss, and not the nearest one's."""
    options = ("--bits", "adaptive", "--adaptive-weight", 0.0, "--adaptive-period", 3)
    runs = [trained(*options, *rounding) for rounding in ((), ("--rounding", "stochastic"), ("--rounding", "nearest"))]
    default, stochastic, nearest = ([epoch["loss"] for epoch in run] for run in runs)
    assert default == stochastic != nearest
