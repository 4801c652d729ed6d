"""DistGNN-MB's sampling graph of a rank (supergcn.methods.distgnn_mb.graph): a hand-worked
two-rank graph, every rank of a random graph against scipy and the plans' own degrees
(memory-mapped, as the trainer loads it), rows placed past 2^32 entries of a sparse file,
and the plans it refuses."""

import os
from types import SimpleNamespace

import numpy as np
import pytest

from supergcn.data.graph import build_graph, load_graph, save_graph
from supergcn.errors import SuperGCNError
from supergcn.methods.distgnn_mb.graph import PartitionGraph
from supergcn.partition.partition import Partition
from supergcn.testing.plans import build_plans

#: A graph worked by hand: parts 0, 1, 2; node 8 (part 1) touches only nodes of part 1, and
#: node 4 has a self loop. Rows (sorted neighbours):
#: 0: 1 2 7 | 1: 0 2 6 8 | 2: 0 1 3 6 | 3: 2 4 8 | 4: 3 4 5 7 | 5: 4 6 | 6: 1 2 5 | 7: 0 4 | 8: 1 3
HAND_EDGES = [(0, 1), (0, 2), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (2, 6), (1, 6), (4, 4), (0, 7), (4, 7),
              (1, 8), (3, 8)]
HAND_PARTS = np.array([0, 1, 0, 1, 0, 1, 2, 0, 1])
#: Rank 0's plan order of its nodes 0, 2, 4, 7: local ids 0..3.
HAND_OWNED = np.array([4, 7, 0, 2])


def graph_of(edges, num_nodes: int):
    """A prepared graph of ``edges`` (no features to speak of)."""
    src, dst = np.array(edges).T
    empty = np.zeros(num_nodes, dtype=bool)
    return build_graph("test", src, dst, np.zeros((num_nodes, 1)), np.zeros(num_nodes), empty, empty, empty)


def hand_rank_0() -> PartitionGraph:
    return PartitionGraph.from_graph(graph_of(HAND_EDGES, 9), HAND_PARTS, 3, 0, HAND_OWNED)


def test_the_hand_worked_rank_has_its_solid_nodes_in_plan_order_then_its_halos_sorted():
    local = hand_rank_0()
    # halos: 3, 5 (of node 4), 1 (of node 0), 1, 3, 6 (of node 2); node 7 has none; 8 is no neighbour
    assert local.global_ids.tolist() == [4, 7, 0, 2, 1, 3, 5, 6]
    assert (local.num_owned, local.num_halo) == (4, 4)
    assert local.halo_owner.tolist() == [1, 1, 1, 2] and local.halo_owner.dtype == np.int32
    # node 4: 3 4 5 7 -> 5 0 6 1; node 7: 0 4 -> 2 0; node 0: 1 2 7 -> 4 3 1; node 2: 0 1 3 6 -> 2 4 5 7
    assert local.indptr.tolist() == [0, 4, 6, 9, 13]
    assert local.indices.tolist() == [5, 0, 6, 1, 2, 0, 4, 3, 1, 2, 4, 5, 7]
    # full-graph degrees, the self loop counted once, halos' from rows the rank does not hold
    assert local.degree.tolist() == [4, 2, 3, 4, 4, 3, 2, 3]
    # halos on rank 1: node 4 (via 3, 5), node 0 (via 1), node 2 (via 1, 3); on rank 2: node 2 (via 6)
    assert [part.tolist() for part in local.boundary] == [[], [0, 2, 3], [3]]
    for array in (local.indptr, local.indices, local.global_ids, local.degree, *local.boundary):
        assert array.dtype == np.int64


def test_a_rank_owning_every_node_has_no_halo_and_no_boundary():
    graph = graph_of(HAND_EDGES, 9)
    local = PartitionGraph.from_graph(graph, np.zeros(9, dtype=np.int64), 1, 0, np.arange(9))
    assert local.num_halo == 0 and [part.tolist() for part in local.boundary] == [[]]
    assert local.indptr.tolist() == graph.indptr.tolist() and local.indices.tolist() == graph.indices.tolist()


def expected_boundary(adjacency, owned, parts, peer) -> list[int]:
    """Positions (plan order) of the owned nodes with a neighbour on ``peer``, by scipy."""
    return np.flatnonzero(adjacency[owned][:, np.flatnonzero(parts == peer)].getnnz(axis=1) > 0).tolist()


@pytest.mark.parametrize("shuffle", [False, True])
def test_every_rank_of_a_random_graph_matches_scipy_and_its_plan(awkward_graph, tmp_path, shuffle):
    """Each owned row's neighbours, as original ids, are the graph's row; the halos are the
    neighbours owned elsewhere; degrees, owners and boundaries follow; the degrees of the
    owned nodes are the plan's. Graph and parts memory-mapped, as the trainer loads them."""
    num_parts = 3
    parts = np.random.default_rng(5).integers(0, num_parts, awkward_graph.num_nodes)
    plans, _ = build_plans(awkward_graph, Partition(parts, num_parts), "post")
    save_graph(awkward_graph, tmp_path / "graph")
    np.save(tmp_path / "parts.npy", parts)
    graph = load_graph(tmp_path / "graph", mmap=True)
    mapped_parts = np.load(tmp_path / "parts.npy", mmap_mode="r")
    adjacency = awkward_graph.adjacency()
    degrees = adjacency.getnnz(axis=1)
    for plan in plans:
        order = np.random.default_rng(plan.rank).permutation(plan.num_owned) if shuffle else np.arange(plan.num_owned)
        owned = plan.owned_old_ids[order]
        local = PartitionGraph.from_graph(graph, mapped_parts, num_parts, plan.rank, owned)
        n = local.num_owned
        assert local.global_ids[:n].tolist() == owned.tolist()
        for i, node in enumerate(owned):
            row = local.indices[local.indptr[i]:local.indptr[i + 1]]
            assert local.global_ids[row].tolist() == adjacency[node].indices.tolist()
        neighbours = np.unique(adjacency[owned].indices)
        assert local.global_ids[n:].tolist() == neighbours[parts[neighbours] != plan.rank].tolist()
        assert local.halo_owner.tolist() == parts[local.global_ids[n:]].tolist()
        assert local.degree.tolist() == degrees[local.global_ids].tolist()
        assert local.degree[:n].tolist() == plan.in_degree[order].tolist()
        for peer in range(num_parts):
            expected = [] if peer == plan.rank else expected_boundary(adjacency, owned, parts, peer)
            assert local.boundary[peer].tolist() == expected


def sparse_files_supported(directory) -> bool:
    """Whether a file with a 64 MiB hole takes no blocks here (else the test below would
    write gigabytes)."""
    probe = directory / "probe"
    with open(probe, "wb") as file:
        file.truncate(64 << 20)
    sparse = os.stat(probe).st_blocks * 512 < (1 << 20)
    probe.unlink()
    return sparse


def test_rows_past_two_to_the_32_entries_are_read_and_counted_in_int64(tmp_path):
    """A graph whose owned rows start past entry 2^32 and whose halos have 2^32 + 7 and 2^31
    neighbours: the indices live in a sparse file (about 26 GB, of which a page is written),
    so nothing of that size is allocated. Node 0 (part 1): entries 0 .. B-1; node 1 (rank 0):
    B, B+1 = 0 2; node 2 (rank 0): B+2, B+3 = 1 3; node 3 (part 1): 2^31 entries after."""
    if not sparse_files_supported(tmp_path):
        pytest.skip("this file system has no sparse files")
    start = 2**32 + 7
    indptr = np.array([0, start, start + 2, start + 4, start + 4 + 2**31], dtype=np.int64)
    indices = np.memmap(tmp_path / "indices", dtype=np.int32, mode="w+", shape=(int(indptr[-1]),))
    indices[start:start + 4] = [0, 2, 1, 3]
    graph = SimpleNamespace(indptr=indptr, indices=indices, num_nodes=4)
    local = PartitionGraph.from_graph(graph, np.array([1, 0, 0, 1]), 2, 0, np.array([2, 1]))
    assert local.global_ids.tolist() == [2, 1, 0, 3]
    assert local.indptr.tolist() == [0, 2, 4]
    assert local.indices.tolist() == [1, 3, 2, 0]  # node 2: 1 3; node 1: 0 2
    assert local.degree.tolist() == [2, 2, 2**32 + 7, 2**31]
    assert [part.tolist() for part in local.boundary] == [[], [0, 1]]


@pytest.mark.parametrize("owned, message", [
    (np.array([4, 7, 0, 2, 4]), "names a node twice"),
    (np.array([4, 7, 0, 2, 9]), "outside the graph"),
    (np.array([4, 7, 0, 2, 1]), "puts on other ranks"),
    (np.array([4, 0, 2]), "does not own nodes the partition gives it"),  # node 7, a neighbour of 0 and 4
])
def test_owned_nodes_that_contradict_the_partition_are_refused(owned, message):
    with pytest.raises(SuperGCNError, match=message):
        PartitionGraph.from_graph(graph_of(HAND_EDGES, 9), HAND_PARTS, 3, 0, owned)
