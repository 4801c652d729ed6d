import json
from dataclasses import fields

import numpy as np
import pytest

from supergcn.data.digests import hash_arrays
from supergcn.errors import SuperGCNError
from supergcn.naming import STRATEGIES
from supergcn.partition.metis import partition_graph
from supergcn.partition.partition import Partition
from supergcn.plan.rank_plan import RankPlan
from supergcn.plan.statistics import strategy_rows
from supergcn.plan.store import load_rank_plan, read_plan_manifest, read_plan_pairs, run_plan
from supergcn.testing.plans import aggregate_in_process, build_plans

from conftest import awkward_edge_list


def reference_mean_aggregation(src, dst, num_nodes, x):
    """ÂX of the undirected simple graph, computed straight from the raw edge list."""
    neighbours = [set() for _ in range(num_nodes)]
    for a, b in zip(src.tolist(), dst.tolist()):
        neighbours[a].add(b)
        neighbours[b].add(a)
    out = np.zeros_like(x)
    for v, nbrs in enumerate(neighbours):
        if nbrs:
            out[v] = x[sorted(nbrs)].sum(0) / len(nbrs)
    return out


@pytest.mark.parametrize("num_parts", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_plan_reproduces_global_mean_aggregation(awkward_graph, num_parts, strategy):
    src, dst = awkward_edge_list(awkward_graph.num_nodes)
    x = np.random.default_rng(num_parts).standard_normal((awkward_graph.num_nodes, 7))
    expected = reference_mean_aggregation(src, dst, awkward_graph.num_nodes, x)
    partition = partition_graph(awkward_graph, num_parts)
    plans, _ = build_plans(awkward_graph, partition, strategy)
    got = aggregate_in_process(plans, x[partition.new_to_old])
    np.testing.assert_allclose(got, expected[partition.new_to_old], rtol=0, atol=1e-10)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_plan_on_random_parts_is_exact(awkward_graph, strategy):
    """A random (badly cut) assignment stresses every pair of ranks."""
    parts = np.random.default_rng(3).integers(0, 6, awkward_graph.num_nodes).astype(np.int32)
    partition = Partition(parts, 6)
    x = np.random.default_rng(0).standard_normal((awkward_graph.num_nodes, 3))
    a = awkward_graph.adjacency().astype(np.float64)
    degree = np.asarray(a.sum(1)).ravel()
    expected = (a @ x) / np.maximum(degree, 1)[:, None]
    plans, _ = build_plans(awkward_graph, partition, strategy)
    got = aggregate_in_process(plans, x[partition.new_to_old])
    np.testing.assert_allclose(got, expected[partition.new_to_old], rtol=0, atol=1e-10)


@pytest.mark.parametrize("num_parts", [2, 3, 4, 8])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_plan_is_exact_on_cora(cora, num_parts, strategy):
    import scipy.sparse as sp

    x = np.random.default_rng(0).standard_normal((cora.num_nodes, 4))
    a = cora.adjacency().astype(np.float64)
    degree = np.asarray(a.sum(1)).ravel()
    expected = sp.diags(1 / np.maximum(degree, 1)) @ (a @ x)
    partition = partition_graph(cora, num_parts)
    plans, _ = build_plans(cora, partition, strategy)
    got = aggregate_in_process(plans, x[partition.new_to_old])
    np.testing.assert_allclose(got, expected[partition.new_to_old], rtol=0, atol=1e-10)


@pytest.mark.parametrize("num_parts", [2, 4, 8])
def test_hybrid_is_optimal_per_pair(cora, num_parts):
    partition = partition_graph(cora, num_parts)
    _, hybrid = build_plans(cora, partition, "hybrid")
    _, pre = build_plans(cora, partition, "pre")
    _, post = build_plans(cora, partition, "post")
    rows = {s: {(p["src"], p["dst"]): p["rows"] for p in pair_records(stats["pairs"])}
            for s, stats in (("pre", pre), ("post", post), ("hybrid", hybrid))}
    for pair in pair_records(hybrid["pairs"]):
        key = (pair["src"], pair["dst"])
        assert pair["cover"] == pair["matching"] == pair["rows"]
        assert pair["rows"] <= min(rows["pre"][key], rows["post"][key])
        assert rows["pre"][key] == pair["distinct_destinations"]
        assert rows["post"][key] == pair["distinct_sources"]
    assert hybrid["total_rows_sent"] < min(pre["total_rows_sent"], post["total_rows_sent"])


@pytest.mark.parametrize("num_parts", [2, 5])
@pytest.mark.parametrize("row_costs", [(67, 65), (1, 4)])
def test_weighted_hybrid_is_cheapest_per_pair_and_exact(awkward_graph, num_parts, row_costs):
    """Under costs per PRE and POST row (GAT's PRE rows cost more), hybrid's cover costs no
    more than pre's or post's on any pair, and its plan still aggregates exactly."""
    pre_cost, post_cost = row_costs
    partition = partition_graph(awkward_graph, num_parts)
    plans, weighted = build_plans(awkward_graph, partition, "hybrid", row_costs)
    _, fewest = build_plans(awkward_graph, partition, "hybrid")
    assert weighted["cover"] == {"pre_row_cost": pre_cost, "post_row_cost": post_cost}
    assert fewest["cover"] == {"pre_row_cost": 1, "post_row_cost": 1}
    for pair in pair_records(weighted["pairs"]):
        cost = pre_cost * pair["pre_rows"] + post_cost * pair["post_rows"]
        assert cost <= min(pre_cost * pair["distinct_destinations"], post_cost * pair["distinct_sources"])
        assert pair["rows"] >= pair["matching"]  # the fewest rows are no longer the aim
    total = sum(pre_cost * p["pre_rows"] + post_cost * p["post_rows"] for p in pair_records(weighted["pairs"]))
    assert total <= sum(pre_cost * p["pre_rows"] + post_cost * p["post_rows"] for p in pair_records(fewest["pairs"]))
    x = np.random.default_rng(1).standard_normal((awkward_graph.num_nodes, 3))
    src, dst = awkward_edge_list(awkward_graph.num_nodes)
    expected = reference_mean_aggregation(src, dst, awkward_graph.num_nodes, x)
    np.testing.assert_allclose(aggregate_in_process(plans, x[partition.new_to_old]), expected[partition.new_to_old],
                               rtol=0, atol=1e-10)


def test_row_costs_are_for_hybrid_only(awkward_graph):
    partition = partition_graph(awkward_graph, 2)
    with pytest.raises(SuperGCNError, match="hybrid strategy only"):
        build_plans(awkward_graph, partition, "pre", (2, 1))


def test_send_and_receive_counts_agree(cora):
    partition = partition_graph(cora, 4)
    plans, stats = build_plans(cora, partition, "hybrid")
    comm = strategy_rows(stats["pairs"], 4, "hybrid")["hybrid"]
    for plan in plans:
        np.testing.assert_array_equal(plan.send_counts, comm[plan.rank])
        np.testing.assert_array_equal(plan.recv_counts, comm[:, plan.rank])
        assert plan.send_counts[plan.rank] == 0
        assert plan.remote_indices.max(initial=-1) < plan.recv_counts.sum()
        assert np.all((plan.post_send_index >= 0) & (plan.post_send_index < plan.num_owned))


def test_saved_plan_round_trip_and_hash_checks(tmp_path, cora):
    partition = partition_graph(cora, 3)
    run_plan(cora, "g-hash", partition, "p-hash", "hybrid", tmp_path / "plan")
    plans, _ = build_plans(cora, partition, "hybrid")
    for plan in plans:
        loaded = load_rank_plan(tmp_path / "plan", plan.rank)
        for name, value in vars(plan).items():
            np.testing.assert_array_equal(getattr(loaded, name), value)
    assert read_plan_manifest(tmp_path / "plan", "g-hash", "p-hash")["num_ranks"] == 3
    with pytest.raises(SuperGCNError, match="different graph"):
        read_plan_manifest(tmp_path / "plan", graph_hash="other")
    with pytest.raises(SuperGCNError, match="different partition"):
        read_plan_manifest(tmp_path / "plan", partition_hash="other")
    with pytest.raises(SuperGCNError, match="missing"):
        load_rank_plan(tmp_path / "plan", 7)


def test_unknown_strategy_is_refused(cora):
    with pytest.raises(SuperGCNError, match="unknown strategy"):
        build_plans(cora, partition_graph(cora, 2), "both")


def test_a_neighbour_outside_the_graph_is_refused_where_a_rank_reads_it(awkward_graph):
    from dataclasses import replace

    partition = partition_graph(awkward_graph, 3)
    indices = awkward_graph.indices.copy()
    indices[-1] = -1  # would wrap around to the last node if used as an index
    with pytest.raises(SuperGCNError, match=r"neighbour ids outside 0\.\.299 \(in the rows of rank \d"):
        build_plans(replace(awkward_graph, indices=indices), partition, "hybrid")


@pytest.mark.parametrize("num_parts", [2, 4, 7])
def test_strategy_rows_of_a_hybrid_manifest_match_pre_and_post_plans(awkward_graph, num_parts):
    """The hybrid plan's manifest gives pre's and post's Comm[i][j] exactly as building
    those plans does, and hybrid never sends more than either on any pair."""
    partition = partition_graph(awkward_graph, num_parts)
    built = {strategy: build_plans(awkward_graph, partition, strategy)[1] for strategy in ("pre", "post", "hybrid")}
    rows = strategy_rows(built["hybrid"]["pairs"], num_parts, "hybrid")
    for strategy in ("pre", "post", "hybrid"):
        own = strategy_rows(built[strategy]["pairs"], num_parts, strategy)[strategy]
        np.testing.assert_array_equal(rows[strategy], own)
        assert own.sum() == built[strategy]["total_rows_sent"]
    assert (rows["hybrid"] <= np.minimum(rows["pre"], rows["post"])).all()


@pytest.mark.parametrize("strategy, expected", [("pre", "33c4827ff7352de6919f06f99667ac55"),
                                                ("post", "b3100484870d02e4a96f0abffda53e3a"),
                                                ("hybrid", "150a06e9d4a939405e75a323147ef787")])
def test_plans_are_pinned_to_the_straightforward_builder(awkward_graph, strategy, expected):
    """Every plan array (values and dtypes) and the plan's statistics, on random parts,
    hash as they did with the builder that lexsorted the cut edges and ran np.unique on
    each key set (before the sort-once rewrite for products scale). The statistics are
    put back into the JSON form of plan format 2, and the original ids each rank file
    gained in format 3 are left out, so the pin is the one of format 2."""
    partition = Partition(np.random.default_rng(3).integers(0, 6, awkward_graph.num_nodes).astype(np.int32), 6)
    plans, stats = build_plans(awkward_graph, partition, strategy)
    arrays = {f"{p.rank}.{f.name}": np.asarray(getattr(p, f.name)) for p in plans for f in fields(RankPlan)
              if f.name != "owned_old_ids"}
    arrays["stats"] = np.frombuffer(json.dumps(format2_stats(stats)).encode(), dtype=np.uint8)
    assert hash_arrays(arrays) == expected
    for plan in plans:
        owned = partition.new_to_old[plan.offset:plan.offset + plan.num_owned]
        np.testing.assert_array_equal(plan.owned_old_ids, owned)


def pair_records(pairs):
    """The per-pair arrays as one dict per pair."""
    return [{name: int(values[k]) for name, values in pairs.items()} for k in range(len(pairs["src"]))]


def format2_stats(stats):
    """Plan format 2's plan.json statistics, rebuilt from format 3's arrays (without the
    ``cover`` record, added since)."""
    num_ranks, strategy = stats["num_ranks"], stats["strategy"]
    totals = {key: value for key, value in stats.items() if key not in ("strategy", "num_ranks", "pairs", "cover")}
    comm = strategy_rows(stats["pairs"], num_ranks, strategy)[strategy]
    return {"strategy": strategy, "num_ranks": num_ranks, "comm_rows": comm.tolist(), **totals,
            "pairs": pair_records(stats["pairs"])}


@pytest.mark.parametrize("max_entries", [1, 40, 500])
def test_hybrid_cover_matched_in_batches_stays_exact_and_minimal(awkward_graph, monkeypatch, max_entries):
    """The path for more than 2^31 - 1 cut edges (scipy's matching indexes with int32),
    forced on a small graph: pairs matched in batches give the same plans, a minimum cover
    per pair (the matching size, König) and an exact aggregation; a pair larger than a
    batch is refused."""
    import supergcn.plan.builder as plan_module

    partition = Partition(np.random.default_rng(3).integers(0, 6, awkward_graph.num_nodes).astype(np.int32), 6)
    whole_plans, whole = build_plans(awkward_graph, partition, "hybrid")
    largest_pair = int(whole["pairs"]["cut_edges"].max())
    monkeypatch.setattr(plan_module, "MATCHING_MAX_ENTRIES", max_entries)
    if max_entries < largest_pair:
        with pytest.raises(SuperGCNError, match="more than the"):
            build_plans(awkward_graph, partition, "hybrid")
        monkeypatch.setattr(plan_module, "MATCHING_MAX_ENTRIES", largest_pair)
    plans, batched = build_plans(awkward_graph, partition, "hybrid")
    # Hopcroft-Karp on a disjoint union finds each part's matching as it would alone: the
    # batched plans are the same plans, array for array.
    for plan, plan_whole in zip(plans, whole_plans):
        for field in fields(RankPlan):
            np.testing.assert_array_equal(getattr(plan, field.name), getattr(plan_whole, field.name))
    np.testing.assert_array_equal(batched["pairs"]["rows"], whole["pairs"]["rows"])
    np.testing.assert_array_equal(batched["pairs"]["cover"], batched["pairs"]["matching"])
    x = np.random.default_rng(0).standard_normal((awkward_graph.num_nodes, 3))
    a = awkward_graph.adjacency().astype(np.float64)
    expected = (a @ x) / np.maximum(np.asarray(a.sum(1)).ravel(), 1)[:, None]
    got = aggregate_in_process(plans, x[partition.new_to_old])
    np.testing.assert_allclose(got, expected[partition.new_to_old], rtol=0, atol=1e-10)


def test_plan_manifest_does_not_grow_with_the_number_of_ranks(tmp_path):
    """plan.json, which every rank reads, holds totals only: its size is the same at P = 2
    and P = 64 (the per-pair statistics are arrays in pairs.npz)."""
    from supergcn.data.datasets import prepare_dataset

    graph = prepare_dataset("synthetic-tiny", seed=0)
    sizes = {}
    for num_parts in (2, 64):
        partition = Partition(np.arange(graph.num_nodes, dtype=np.int32) % num_parts, num_parts)
        run_plan(graph, "g", partition, "p", "hybrid", tmp_path / f"P{num_parts}")
        sizes[num_parts] = (tmp_path / f"P{num_parts}" / "plan.json").stat().st_size
        assert num_parts * (num_parts - 1) / 2 < len(read_plan_pairs(tmp_path / f"P{num_parts}")["src"])
    assert abs(sizes[64] - sizes[2]) < 64, sizes
