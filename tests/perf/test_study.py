"""The plan-only study's predictions from real plans."""

import pandas as pd
import pytest

from supergcn.errors import SuperGCNError
from supergcn.methods.mixgcn.exchange import epoch_transpose_values
from supergcn.models import card
from supergcn.partition.store import read_part_totals
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


def test_a_partition_or_plan_of_another_graph_is_refused(tiny_plans, tmp_path):
    """A graph of other content (another seed) with this graph's partition and plan: the
    prediction would be of rows the graph does not have."""
    from conftest import run_cli

    assert run_cli("prepare", "synthetic-tiny", "--seed", 1, "--out", tmp_path / "other").returncode == 0
    machines = [MachineProfile("fast", 1e-7, 1e10, 5e10, 5e10)]
    with pytest.raises(SuperGCNError, match="was built from a different graph"):
        study.predict(tmp_path / "other", tiny_plans / "P2", tiny_plans / "P2-hybrid", machines, 32, 3, [2])


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
    pre_bits, _ = row_costs(card("gat"), 3, 32, 4, study.read_graph_meta(tiny_plans / "graph")["num_classes"])
    assert fp32["pre"] * 8 == gat["rows"]["pre"] * pre_bits
    hybrid = study.hybrid_table(list(documents.values()))
    assert list(hybrid["model"]) == ["gat", "sage"]
    assert (hybrid["post_over_hybrid_bytes"] >= 1).all()
    table = study.prediction_table(list(documents.values()))
    crossover = study.crossover_table(table, study.methods_table(list(documents.values())))
    assert set(study.regime_table(table)["model"]) == set(crossover["model"]) == {"sage", "gat"}
    assert crossover[crossover["model"] == "gat"]["mop_fewer_bytes_from_P"].isna().all()


def test_sages_prediction_holds_the_compared_methods_beside_supergcns(tiny_plans):
    """BNS-GCN, PipeGCN and MixGCN on the real plan: SuperGCN's rows are perf_predictions'
    epochs, sampling sends fewer bytes, PipeGCN is never slower than its synchronous
    exchange, MixGCN sends its Alg. 2's volume of the partition's row blocks."""
    machines = [MachineProfile("fast", 1e-7, 1e10, 5e10, 5e10),
                MachineProfile("gemm", 1e-4, 1e8, 1e9, 1e9, dense_flops_per_s=1e9, dense_call_s=1e-6)]
    document = study.predict(tiny_plans / "graph", tiny_plans / "P2", tiny_plans / "P2-hybrid", machines,
                             hidden=32, num_layers=3, bits=[2], boundary_rates=[0.5, 0.0])
    table = study.methods_table([document])
    assert list(table["method"].unique()) == ["hybrid-int2", "post-fp32", "vanilla", "bns-0.5", "bns-0", "pipegcn",
                                              "sar", "mixgcn"]
    meta = study.read_graph_meta(tiny_plans / "graph")
    blocks = read_part_totals(tiny_plans / "P2")["nodes"]
    mixgcn = table[table["method"] == "mixgcn"]
    assert (mixgcn["epoch_bytes"] == 4 * epoch_transpose_values(blocks, [meta["feature_dim"], 32, 32])).all()
    # the replicated adjacency, int64 pointers and indices, and the wider rank's column slices: half of each width
    nodes, slices = meta["num_nodes"], -(-meta["feature_dim"] // 2) + 16 + 16
    assert (mixgcn["memory_bytes_per_rank"] == 8 * (nodes + 1 + meta["num_edges_directed"]) + 4 * nodes * slices).all()
    # the one-shot exchange's receive buffer of every peer's rows against SAR's largest peer's
    assert (table[table["method"] == "sar"]["memory_bytes_per_rank"].to_numpy()
            <= table[table["method"] == "vanilla"]["memory_bytes_per_rank"].to_numpy()).all()
    assert table[~table["method"].isin(["mixgcn", "vanilla", "sar"])]["memory_bytes_per_rank"].isna().all()
    predictions = study.prediction_table([document]).set_index(["machine", "strategy", "bits"])
    for machine, rows in table.groupby("machine"):
        rows = rows.set_index("method")
        for method, strategy, bits in (("hybrid-int2", "hybrid", 2), ("post-fp32", "post", 32)):
            predicted = predictions.loc[(machine, strategy, bits)]
            assert rows.loc[method, "epoch_bytes"] == predicted["epoch_bytes"]
            assert rows.loc[method, "epoch_exchange_seconds"] == pytest.approx(predicted["epoch_exchange_seconds"])
            if machine == "fast":  # no dense term: aggregation + exchange, as perf_predictions has it
                assert rows.loc[method, "epoch_seconds"] == pytest.approx(predicted["epoch_seconds"])
        assert rows.loc["bns-0", "epoch_bytes"] == 0 and rows.loc["bns-0", "epoch_calls"] == 0
        assert rows.loc["bns-0.5", "epoch_bytes"] < rows.loc["vanilla", "epoch_bytes"] == rows.loc["pipegcn",
                                                                                                  "epoch_bytes"]
        assert rows.loc["pipegcn", "epoch_seconds"] <= rows.loc["vanilla", "epoch_seconds"]
        assert pd.isna(rows.loc["pipegcn", "epoch_dense_seconds"]) == (machine == "fast")
    gat = study.predict(tiny_plans / "graph", tiny_plans / "P2", tiny_plans / "P2-hybrid-gat", machines[:1],
                        hidden=32, num_layers=3, bits=[2], model="gat", heads=4)
    assert gat["methods"] == [] and study.methods_table([gat]).empty


def test_aggregate_first_predicts_the_wider_exchanges_upstream_sends(tiny_plans):
    """With aggregate_first every SAGE layer exchanges its input's width: an epoch's bytes are
    the traffic model's for the wider layers, more than by default where the last layer
    narrows (hidden 32 to the graph's classes); the tables say which was predicted."""
    from supergcn.perf.traffic import epoch_traffic

    machines = [MachineProfile("fast", 1e-7, 1e10, 5e10, 5e10)]
    documents = [study.predict(tiny_plans / "graph", tiny_plans / "P2", tiny_plans / "P2-hybrid", machines,
                               hidden=32, num_layers=3, bits=[2], aggregate_first=first) for first in (False, True)]
    meta = study.read_graph_meta(tiny_plans / "graph")
    assert meta["num_classes"] < 32
    for document, first in zip(documents, (False, True)):
        assert document["aggregate_first"] is first
        post = next(p for p in document["predictions"] if (p["strategy"], p["bits"]) == ("post", 32))
        rows = document["rows"]["post"]
        widths = [exchange.width for exchange in epoch_traffic("sage", 0, 0, meta["feature_dim"], 32,
                                                               meta["num_classes"], 3, 32,
                                                               aggregate_first=first).exchanges]
        assert post["epoch_bytes"] == rows * 4 * sum(widths)
    assert study.prediction_table(documents)["aggregate_first"].tolist().count(True) == len(
        documents[1]["predictions"])
    default, upstream = (next(p["epoch_bytes"] for p in d["predictions"] if (p["strategy"], p["bits"]) == ("post", 32))
                         for d in documents)
    assert upstream > default
    # perf_methods' SuperGCN rows are those epochs, as its column says.
    for document in documents:
        post = next(p for p in document["predictions"] if (p["strategy"], p["bits"]) == ("post", 32))
        (row,) = [m for m in document["methods"] if m["method"] == "post-fp32"]
        assert row["epoch_bytes"] == post["epoch_bytes"]
