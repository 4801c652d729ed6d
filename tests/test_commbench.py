"""The MPI benchmarks behind the performance model, and the model study's predictions."""

import json

import numpy as np
import pytest

from supergcn import modelstudy, perfmodel
from supergcn.errors import SuperGCNError
from supergcn.perfmodel import MachineProfile
from supergcn.plan import read_plan_manifest

from conftest import run_cli, run_mpi


@pytest.fixture(scope="module")
def tiny_plans(tmp_path_factory):
    root = tmp_path_factory.mktemp("plans")
    assert run_cli("prepare", "synthetic-tiny", "--out", root / "graph").returncode == 0
    assert run_cli("partition", "--graph", root / "graph", "--parts", 2, "--out", root / "P2").returncode == 0
    for strategy in ("pre", "hybrid"):
        result = run_cli("plan", "--graph", root / "graph", "--partition", root / "P2", "--strategy", strategy,
                         "--out", root / f"P2-{strategy}")
        assert result.returncode == 0, result.stderr
    return root


def test_bench_comm_fits_latency_and_bandwidth(tmp_path):
    out = tmp_path / "comm.json"
    result = run_mpi(2, "bench", "comm", "--json", out)
    assert result.returncode == 0, result.stderr
    measured = json.loads(out.read_text())
    assert measured["num_ranks"] == 2 and measured["ping_pong_latency_s"] > 0
    sizes = [point["bytes_per_peer"] for point in measured["alltoallv"]]
    assert sizes == sorted(sizes) and sizes[-1] >= 2**23
    # 8 MiB per peer takes longer than 8 B: the sweep spans both regimes the fit needs.
    assert measured["alltoallv"][-1]["seconds"] > 10 * measured["alltoallv"][0]["seconds"]
    assert measured["fit"]["latency_s"] > 0 and measured["fit"]["bandwidth_bytes_per_s"] > 0


@pytest.mark.parametrize("bits", [32, 2])
def test_bench_exchange_moves_the_bytes_the_model_counts(tiny_plans, tmp_path, bits):
    """The communicator's byte counters in a real exchange equal the model's data plus
    parameter bytes at the busiest sender."""
    plan = tiny_plans / "P2-hybrid"
    out = tmp_path / "exchange.json"
    result = run_mpi(2, "bench", "exchange", "--plan", plan, "--features", 24, "--bits", bits, "--repeats", 3,
                     "--json", out)
    assert result.returncode == 0, result.stderr
    measured = json.loads(out.read_text())
    rows = perfmodel.comm_rows(read_plan_manifest(plan))["hybrid"]
    machine = MachineProfile("m", 1e-6, 1e9, 1e9, 1e9)
    sent = [perfmodel.exchange_time(rows * np.eye(2, dtype=int)[rank][:, None], 24, bits, machine)
            for rank in range(2)]
    expected = max(p.data_bytes + p.param_bytes for p in sent)
    assert measured["max_bytes_sent_per_exchange"] == expected
    seconds = measured["seconds"]
    assert seconds["total"] >= seconds["communication"] > 0
    assert (seconds["quantization"] > 0) == (bits != 32)


def test_bench_exchange_with_the_wrong_rank_count_fails_cleanly(tiny_plans):
    result = run_mpi(3, "bench", "exchange", "--plan", tiny_plans / "P2-hybrid")
    assert result.returncode == 2
    assert "is for 2 ranks, not 3: run with mpiexec -n 2" in result.stderr
    assert result.stderr.count("error:") == 1


def test_predictions_never_favour_pre_or_post_over_hybrid(tiny_plans, tmp_path):
    machines = [MachineProfile("fast", 1e-7, 1e10, 5e10, 5e10), MachineProfile("slow", 1e-4, 1e8, 1e9, 1e9)]
    document = modelstudy.predict(tiny_plans / "graph", tiny_plans / "P2", tiny_plans / "P2-hybrid", machines,
                                  hidden=32, num_layers=3, bits=[2, 4])
    assert document["num_ranks"] == 2
    assert document["rows"]["hybrid"] <= min(document["rows"]["pre"], document["rows"]["post"])
    table = modelstudy.prediction_table([document])
    for machine in ("fast", "slow"):
        fp32 = table[(table["machine"] == machine) & (table["bits"] == 32)].set_index("strategy")["layer_seconds"]
        assert fp32["hybrid"] <= min(fp32["pre"], fp32["post"])
        assert set(table[table["machine"] == machine]["bits"]) == {32, 2, 4}
    with pytest.raises(SuperGCNError, match="pre plan"):
        modelstudy.predict(tiny_plans / "graph", tiny_plans / "P2", tiny_plans / "P2-pre", machines, 32, 3, [2])
