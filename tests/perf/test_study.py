"""The plan-only study's predictions from real plans."""

import pytest

from supergcn.errors import SuperGCNError
from supergcn.perf import study
from supergcn.perf.prediction import MachineProfile


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


def test_gat_is_predicted_on_its_weighted_plan_beside_sage(tiny_plans):
    """GAT's epoch counts its scores and scalars; on its weighted plan hybrid sends no more
    bytes than pre or post; the tables keep the two models apart."""
    from supergcn.plan.costs import row_costs

    machines = [MachineProfile("fast", 1e-7, 1e10, 5e10, 5e10)]
    documents = {model: study.predict(tiny_plans / "graph", tiny_plans / "P2", tiny_plans / f"P2-{plan}", machines,
                                      hidden=32, num_layers=3, bits=[2], model=model, heads=4)
                 for model, plan in (("sage", "hybrid"), ("gat", "hybrid-gat"))}
    gat = documents["gat"]
    assert gat["model"] == "gat" and gat["heads"] == 4
    pre_cost, post_cost = (gat["cover"]["pre_row_cost"], gat["cover"]["post_row_cost"])
    assert pre_cost > post_cost  # the plan holds GAT's cover, priced for the 256-wide default it was planned at
    by_strategy = {(p["strategy"], p["bits"]): p for p in gat["predictions"]}
    fp32 = {strategy: by_strategy[(strategy, 32)]["epoch_bytes"] for strategy in ("pre", "post", "hybrid")}
    assert fp32["hybrid"] <= min(fp32["pre"], fp32["post"])
    assert all(p["epoch_attention_bytes"] > 0 for p in gat["predictions"])
    assert all(p["epoch_attention_bytes"] == 0 for p in documents["sage"]["predictions"])
    # pre sends only PRE rows: its bytes are the PRE cost per row at the predicted width (32)
    pre_bits, _ = row_costs("gat", 3, 32, 4, study.read_graph_meta(tiny_plans / "graph")["num_classes"])
    assert fp32["pre"] * 8 == gat["rows"]["pre"] * pre_bits
    hybrid = study.hybrid_table(list(documents.values()))
    assert list(hybrid["model"]) == ["gat", "sage"]
    assert (hybrid["post_over_hybrid_bytes"] >= 1).all()
    table = study.prediction_table(list(documents.values()))
    assert set(study.regime_table(table)["model"]) == set(study.crossover_table(table)["model"]) == {"sage", "gat"}
