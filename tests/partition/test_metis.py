import numpy as np
import pymetis
import pytest
import scipy.sparse as sp

from supergcn.data.graph import build_graph
from supergcn.errors import SuperGCNError
from supergcn.partition.metis import metis_adjacency, partition_graph, sampled_adjacency
from supergcn.partition.partition import Partition, capped_weight, combined_weight, constraint_weights, edge_cut
from supergcn.partition.store import load_partition, read_part_totals, run_partition


def grid_graph(side=60, train_rows=15):
    """A grid whose training nodes all sit in the top rows: balancing nodes alone
    puts them in few parts."""
    n = side * side
    idx = np.arange(n).reshape(side, side)
    src = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
    dst = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
    train = np.zeros(n, bool)
    train[idx[:train_rows].ravel()] = True
    return build_graph("grid", src, dst, np.zeros((n, 1)), np.zeros(n, int), train, np.zeros(n, bool),
                       np.zeros(n, bool))


def imbalance(parts, weight, num_parts):
    totals = np.bincount(parts, weights=weight, minlength=num_parts)
    return totals.max() / totals.mean()


def test_pymetis_ignores_multiconstraint():
    """Measures the pymetis limitation documented in supergcn.partition.metis: an interleaved
    two-constraint weight list is read as a single constraint."""
    g = grid_graph()
    adjacency = g.adjacency()
    weights = np.stack([np.ones(g.num_nodes, int), g.train_mask.astype(int)], axis=1).ravel()
    kwargs = dict(adjacency=pymetis.CSRAdjacency(adjacency.indptr, adjacency.indices), recursive=False)
    two = np.asarray(pymetis.part_graph(4, vweights=weights, **kwargs).vertex_part)
    misread = np.asarray(pymetis.part_graph(4, vweights=weights[:g.num_nodes], **kwargs).vertex_part)
    assert np.array_equal(two, misread), (
        "pymetis now honours several constraints: pass them separately in supergcn.partition.metis")


def test_combined_weight_balances_training_nodes_better_than_node_count():
    g = grid_graph()
    nodes_only = partition_graph(g, 4, constraints=("nodes",))
    combined = partition_graph(g, 4, constraints=("nodes", "train"))
    train = g.train_mask.astype(float)
    assert imbalance(nodes_only.parts, train, 4) > 1.5
    assert imbalance(combined.parts, train, 4) < imbalance(nodes_only.parts, train, 4) - 0.5


def test_combined_weight_gives_each_constraint_equal_total():
    g = grid_graph()
    weights = constraint_weights(g, ("nodes", "in_degree", "train"))
    w = combined_weight(weights)
    assert w.min() >= 1
    # Each constraint contributes S * n in total, up to rounding.
    s = 16
    assert abs(w.sum() - 3 * s * g.num_nodes) < 0.01 * w.sum()


def test_partition_is_contiguous_after_renumbering(cora):
    part = partition_graph(cora, 5)
    new_parts = part.parts[part.new_to_old]
    assert np.all(np.diff(new_parts) >= 0)
    np.testing.assert_array_equal(part.old_to_new[part.new_to_old], np.arange(cora.num_nodes))
    assert part.offsets[-1] == cora.num_nodes and len(part.offsets) == 6


@pytest.mark.parametrize("num_parts", [2, 4, 8])
def test_metis_cut_is_far_below_random(cora, facebook, num_parts):
    rng = np.random.default_rng(0)
    for g in (cora, facebook):
        metis_cut = edge_cut(g, partition_graph(g, num_parts).parts)
        random_cut = edge_cut(g, rng.integers(0, num_parts, g.num_nodes))
        assert metis_cut < 0.35 * random_cut, (g.name, metis_cut, random_cut)


def test_edge_cut_counts_undirected_cut_edges():
    g = build_graph("path", [0, 1, 2], [1, 2, 3], np.zeros((4, 1)), np.zeros(4, int), np.ones(4, bool),
                    np.zeros(4, bool), np.zeros(4, bool))
    assert edge_cut(g, np.array([0, 0, 1, 1])) == 1
    assert edge_cut(g, np.array([0, 1, 0, 1])) == 3


def test_single_part_and_bad_part_counts(cora):
    assert np.all(partition_graph(cora, 1).parts == 0)
    with pytest.raises(SuperGCNError, match="at least 1"):
        partition_graph(cora, 0)
    with pytest.raises(SuperGCNError, match="P <= number of nodes"):
        partition_graph(cora, cora.num_nodes + 1)


def test_manifest_reports_balance_and_detects_foreign_graph(tmp_path, cora):
    manifest = run_partition(cora, "hash-a", 4, tmp_path / "p")
    assert manifest["graph_hash"] == "hash-a" and manifest["num_parts"] == 4
    totals = read_part_totals(tmp_path / "p")
    assert totals["nodes"].sum() == cora.num_nodes and totals["edges"].sum() == cora.num_edges
    assert totals["train_nodes"].sum() == cora.train_mask.sum()
    assert manifest["balance"]["edges"]["imbalance_max_over_mean"] == totals["edges"].max() / totals["edges"].mean()
    assert manifest["engine"]["name"] == "metis"
    assert manifest["balance"]["train_nodes"]["imbalance_max_over_mean"] >= 1.0
    assert manifest["edge_cut"] == edge_cut(cora, np.load(tmp_path / "p" / "parts.npy"))
    partition, _ = load_partition(tmp_path / "p", "hash-a")
    assert isinstance(partition, Partition)
    with pytest.raises(SuperGCNError, match="different graph"):
        load_partition(tmp_path / "p", "hash-b")


def test_metis_adjacency_is_the_graph_without_self_loops(awkward_graph):
    """The arrays METIS gets equal the scipy route they replaced (setdiag(0), eliminate_zeros)."""
    reference = awkward_graph.adjacency()
    reference.setdiag(0)
    reference.eliminate_zeros()
    assert awkward_graph.num_self_loops > 0
    xadj, adjncy = metis_adjacency(awkward_graph, np.int64)
    assert xadj.dtype == adjncy.dtype == np.int64
    np.testing.assert_array_equal(xadj, reference.indptr)
    np.testing.assert_array_equal(adjncy, reference.indices)


def test_sampled_adjacency_is_a_symmetric_seeded_subset(awkward_graph):
    def matrix(xadj, adjncy):
        n = awkward_graph.num_nodes
        return sp.csr_matrix((np.ones(len(adjncy)), adjncy, xadj), shape=(n, n))

    whole = matrix(*metis_adjacency(awkward_graph, np.int64))
    xadj, adjncy = sampled_adjacency(awkward_graph, np.int64, 0.5, seed=4)
    sample = matrix(xadj, adjncy)
    assert sample.has_sorted_indices
    assert (sample != sample.T).nnz == 0, "not symmetric"
    assert (sample - sample.multiply(whole)).nnz == 0, "an edge the graph does not have"
    assert 0.4 < sample.nnz / whole.nnz < 0.6
    again = sampled_adjacency(awkward_graph, np.int64, 0.5, seed=4)
    np.testing.assert_array_equal(again[1], adjncy)
    assert not np.array_equal(sampled_adjacency(awkward_graph, np.int64, 0.5, seed=5)[1], adjncy)


def test_edge_fraction_is_recorded_and_the_cut_measured_on_the_whole_graph(tmp_path):
    g = grid_graph()
    manifest = run_partition(g, "hash", 4, tmp_path / "p", edge_fraction=0.7)
    assert manifest["metis_edge_fraction"] == 0.7
    assert manifest["edge_cut"] == edge_cut(g, np.load(tmp_path / "p" / "parts.npy"))
    assert run_partition(g, "hash", 4, tmp_path / "q")["metis_edge_fraction"] == 1.0
    with pytest.raises(SuperGCNError, match="edge fraction"):
        partition_graph(g, 4, edge_fraction=0)


def test_capped_weight_leaves_no_node_heavier_than_a_parts_share():
    """Hubs that outweigh a part make any balance infeasible: capped (repeatedly, as the
    total shrinks), no node exceeds total / P, and lighter nodes keep their weight."""
    weight = np.array([1000, 900, 5, 5, 5, 5, 5, 5, 5, 5])
    capped = capped_weight(weight, 4)
    assert capped.max() <= capped.sum() // 4
    np.testing.assert_array_equal(capped[2:], weight[2:])
    assert capped[0] == capped[1] < 900
    np.testing.assert_array_equal(capped_weight(np.full(8, 3), 4), np.full(8, 3))
