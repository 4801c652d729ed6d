import kaminpar
import numpy as np
import pytest
from test_metis import grid_graph, imbalance

from supergcn.errors import SuperGCNError
from supergcn.partition.kaminpar import LARGE_K, fill_empty_parts, preset_for, write_parhip
from supergcn.partition.metis import partition_graph
from supergcn.partition.partition import combined_weight, constraint_weights, edge_cut
from supergcn.partition.store import Engine, read_part_totals, run_partition

KAMINPAR = Engine("kaminpar", threads=1, preset="fast", large_k_preset="largek-fast")


@pytest.mark.parametrize("wide_ids_from", [0, 2**31])
@pytest.mark.parametrize("block_entries", [7, 1 << 24])
def test_parhip_file_is_the_graph_without_self_loops_as_kaminpar_reads_it(tmp_path, awkward_graph, block_entries,
                                                                          wide_ids_from, monkeypatch):
    """KaMinPar's own parser, reading the streamed file, sees every row of the CSR less
    its self loop, and every node weight; also with the 64-bit node ids of graphs past
    2^31 nodes, forced here on a small one."""
    import supergcn.partition.kaminpar as kaminpar_module

    monkeypatch.setattr(kaminpar_module, "WIDE_IDS_FROM", wide_ids_from)
    weights = np.arange(awkward_graph.num_nodes) % 5 + 1
    path = tmp_path / "g.parhip"
    entries = write_parhip(awkward_graph, path, weights, block_entries=block_entries)
    assert awkward_graph.num_self_loops > 0
    assert entries == awkward_graph.num_edges - awkward_graph.num_self_loops
    id_bytes = 8 if wide_ids_from == 0 else 4
    n = awkward_graph.num_nodes
    assert path.stat().st_size == 8 * (3 + n + 1) + id_bytes * entries + 8 * n  # header, offsets, ids, weights
    loaded = kaminpar.load_graph(str(path), kaminpar.GraphFileFormat.PARHIP)
    assert (loaded.n(), loaded.m()) == (awkward_graph.num_nodes, entries)
    assert loaded.is_node_weighted() and not loaded.is_edge_weighted()
    adjacency = awkward_graph.adjacency().tolil()
    adjacency.setdiag(0)
    adjacency = adjacency.tocsr()
    adjacency.eliminate_zeros()
    for u in range(awkward_graph.num_nodes):
        neighbours = sorted(v for v, _ in loaded.neighbors(u))
        assert neighbours == adjacency.indices[adjacency.indptr[u]:adjacency.indptr[u + 1]].tolist()
        assert loaded.node_weight(u) == weights[u]


def test_kaminpar_partition_is_balanced_recorded_and_cuts_like_metis(tmp_path):
    g = grid_graph()
    manifest = run_partition(g, "hash", 4, tmp_path / "k", constraints=("nodes", "train"), engine=KAMINPAR)
    parts = np.load(tmp_path / "k" / "parts.npy")
    assert manifest["engine"] == {"name": "kaminpar", "method": "KaMinPar, combined vertex weight capped at a part's "
                                  "share", "threads": 1, "preset": "fast"}
    assert np.bincount(parts, minlength=4).min() > 0
    np.testing.assert_array_equal(read_part_totals(tmp_path / "k")["nodes"], np.bincount(parts, minlength=4))
    assert manifest["edge_cut"] == edge_cut(g, parts)
    # The combined weight is what KaMinPar balances, within its 3 %.
    weight = combined_weight(constraint_weights(g, ("nodes", "train")))
    assert imbalance(parts, weight, 4) <= 1.03 + weight.max() * 4 / weight.sum()
    metis_cut = edge_cut(g, partition_graph(g, 4, constraints=("nodes", "train")).parts)
    assert manifest["edge_cut"] <= 1.5 * metis_cut
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k"], "the graph file handed to KaMinPar was left behind"


def test_kaminpar_is_seeded(tmp_path):
    g = grid_graph()
    first = run_partition(g, "hash", 3, tmp_path / "a", seed=5, engine=KAMINPAR)
    again = run_partition(g, "hash", 3, tmp_path / "b", seed=5, engine=KAMINPAR)
    assert first["partition_hash"] == again["partition_hash"]


def test_large_k_preset_beyond_1024_parts():
    assert preset_for(LARGE_K, "terapart", "terapart-largek") == "terapart"
    assert preset_for(LARGE_K + 1, "terapart", "terapart-largek") == "terapart-largek"
    assert Engine("kaminpar").describe(8192)["preset"] == "terapart-largek"


def test_unknown_preset_is_refused_before_work(tmp_path):
    with pytest.raises(SuperGCNError, match="no preset 'quick'"):
        run_partition(grid_graph(), "hash", 2, tmp_path / "x", engine=Engine("kaminpar", preset="quick"))
    assert not (tmp_path / "x").exists()


def test_an_edge_fraction_is_refused_for_kaminpar(tmp_path):
    with pytest.raises(SuperGCNError, match=r"KaMinPar partitions the whole graph: partition.edge_fraction "
                       r"\(--edge-fraction\) cannot be 0.5 — set it to 1, or partition.engine to metis"):
        run_partition(grid_graph(), "hash", 2, tmp_path / "x", edge_fraction=0.5, engine=KAMINPAR)


def test_a_left_over_graph_file_is_removed_by_the_next_attempt(tmp_path):
    """A killed job leaves the file it handed KaMinPar; it is named as a staging directory
    of the output, which the next attempt clears."""
    (tmp_path / ".k.tmp-kaminpar-abc.parhip").write_bytes(b"left over")
    run_partition(grid_graph(), "hash", 2, tmp_path / "k", engine=KAMINPAR)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k"]


def test_empty_parts_each_take_the_lightest_node_of_the_largest_part():
    parts = np.array([0, 0, 0, 2, 2], dtype=np.int32)
    weights = np.array([5, 1, 1, 3, 2])
    # Part 1 takes node 2 (weight 1, the last of the two lightest of part 0); part 0 and 2
    # then tie at two nodes, the first (0) gives part 3 its lightest, node 1.
    assert fill_empty_parts(parts, 4, weights, max_empty_fraction=0.5) == 2
    np.testing.assert_array_equal(parts, [0, 3, 1, 2, 2])
    assert fill_empty_parts(parts, 4, weights) == 0


def test_too_many_empty_parts_are_refused():
    with pytest.raises(SuperGCNError, match="left 2 of 4 parts empty"):
        fill_empty_parts(np.array([0, 0, 0, 2, 2], dtype=np.int32), 4, None, max_empty_fraction=0.25)


def test_a_partition_with_parts_kaminpar_left_empty_is_filled_and_says_so(tmp_path, monkeypatch):
    import supergcn.partition.kaminpar as kaminpar_module

    g = grid_graph()
    original = kaminpar_module.kaminpar_parts

    def leaves_part_2_empty(*args, **kwargs):
        parts, peak_mib = original(*args, **kwargs)
        parts[parts == 2] = 1
        return parts, peak_mib

    monkeypatch.setattr(kaminpar_module, "kaminpar_parts", leaves_part_2_empty)
    manifest = run_partition(g, "hash", 100, tmp_path / "k", engine=KAMINPAR)  # 1 empty part in 100 is allowed
    parts = np.load(tmp_path / "k" / "parts.npy")
    assert np.bincount(parts, minlength=100)[2] == 1
    assert manifest["engine"]["empty_parts_filled"] == 1
    assert manifest["edge_cut"] == edge_cut(g, parts)
