"""The plan-only study's predictions from real plans."""

import pytest

from supergcn.errors import SuperGCNError
from supergcn.perf import study
from supergcn.perf.model import MachineProfile


def test_predictions_never_favour_pre_or_post_over_hybrid(tiny_plans, tmp_path):
    machines = [MachineProfile("fast", 1e-7, 1e10, 5e10, 5e10), MachineProfile("slow", 1e-4, 1e8, 1e9, 1e9)]
    document = study.predict(tiny_plans / "graph", tiny_plans / "P2", tiny_plans / "P2-hybrid", machines,
                                  hidden=32, num_layers=3, bits=[2, 4])
    assert document["num_ranks"] == 2
    assert document["rows"]["hybrid"] <= min(document["rows"]["pre"], document["rows"]["post"])
    table = study.prediction_table([document])
    for machine in ("fast", "slow"):
        fp32 = table[(table["machine"] == machine) & (table["bits"] == 32)].set_index("strategy")["layer_seconds"]
        assert fp32["hybrid"] <= min(fp32["pre"], fp32["post"])
        assert set(table[table["machine"] == machine]["bits"]) == {32, 2, 4}
    with pytest.raises(SuperGCNError, match="pre plan"):
        study.predict(tiny_plans / "graph", tiny_plans / "P2", tiny_plans / "P2-pre", machines, 32, 3, [2])
