"""``supergcn bench exchange``: a real layer exchange of a plan, against the model's byte count."""

import json

import pytest

from supergcn.kernels.wire import wire_bytes
from supergcn.plan.store import plan_strategy_rows

from conftest import run_mpi


@pytest.mark.parametrize("bits", [32, 2])
def test_bench_exchange_moves_the_bytes_the_model_counts(tiny_plans, tmp_path, bits):
    """The communicator's byte counters in a real exchange equal the wire bytes the model
    counts, at the busiest sender."""
    plan = tiny_plans / "P2-hybrid"
    out = tmp_path / "exchange.json"
    result = run_mpi(2, "bench", "exchange", "--plan", plan, "--features", 24, "--bits", bits, "--repeats", 3,
                     "--json", out)
    assert result.returncode == 0, result.stderr
    measured = json.loads(out.read_text())
    data, params = wire_bytes(plan_strategy_rows(plan)[1]["hybrid"], 24, bits)
    assert measured["max_bytes_sent_per_exchange"] == (data + params).sum(axis=1).max()
    seconds = measured["seconds"]
    assert seconds["total"] >= seconds["communication"] > 0
    assert (seconds["quantization"] > 0) == (bits != 32)


def test_bench_exchange_with_the_wrong_rank_count_fails_cleanly(tiny_plans):
    result = run_mpi(3, "bench", "exchange", "--plan", tiny_plans / "P2-hybrid")
    assert result.returncode == 2
    assert "is for 2 ranks but 3 were started — launch with `mpiexec -n 2`" in result.stderr
    assert result.stderr.count("error:") == 1
