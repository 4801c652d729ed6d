"""MixGCN's reverse Cuthill-McKee row ranges (supergcn/partition/rcm.py): the order against
scipy's and against the definition written out here, cut into the ranges
floor(N·i/P) .. floor(N·(i+1)/P) - 1, a shuffled path worked by hand, and the command
line end to end."""

import dataclasses
import json
from collections import deque

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import reverse_cuthill_mckee
from test_metis import grid_graph

from supergcn.data.graph import build_graph
from supergcn.errors import SuperGCNError
from supergcn.partition.partition import edge_cut
from supergcn.partition.rcm import cuthill_mckee, degrees, rcm_order, rcm_partition
from supergcn.partition.store import Engine, load_partition, run_partition
from supergcn.report.step_tables import preprocessing_table

from conftest import run_cli

RCM = Engine("rcm")


def graph_of(src, dst, num_nodes, name="g"):
    """A graph of these edges, one training node per node, no features to speak of."""
    return build_graph(name, src, dst, np.zeros((num_nodes, 1)), np.zeros(num_nodes, int), np.ones(num_nodes, bool),
                       np.zeros(num_nodes, bool), np.zeros(num_nodes, bool))


def shuffled_path(num_nodes: int, seed: int = 0):
    """The path through ``path[0], path[1], ...`` with its nodes' ids shuffled; returns the
    graph and ``path``."""
    path = np.random.default_rng(seed).permutation(num_nodes)
    return graph_of(path[:-1], path[1:], num_nodes, "path"), path


def ring_with_a_pendant(num_nodes: int = 400, chords: int = 600, seed: int = 0):
    """A ring with random chords and one node hanging off it, ids shuffled: connected, and
    its one node of degree 1 is where any Cuthill-McKee search must start."""
    rng = np.random.default_rng(seed)
    ring = np.arange(num_nodes - 1)
    src = np.concatenate([ring, rng.integers(0, num_nodes - 1, chords), [0]])
    dst = np.concatenate([np.roll(ring, -1), rng.integers(0, num_nodes - 1, chords), [num_nodes - 1]])
    ids = rng.permutation(num_nodes)
    return graph_of(ids[src], ids[dst], num_nodes, "ring")


def scipy_rcm(graph):
    """scipy's reverse Cuthill-McKee order of the graph's adjacency."""
    return reverse_cuthill_mckee(sp.csr_matrix(graph.adjacency()), symmetric_mode=True)


def cuthill_mckee_by_definition(graph):
    """The Cuthill-McKee order as the module docstring defines it, written out plainly:
    components entered at their least (degree, id), breadth first, each node's new
    neighbours sorted by degree (Python's sort is stable, so ties keep the row's order)."""
    neighbours = [graph.indices[graph.indptr[v]:graph.indptr[v + 1]].tolist() for v in range(graph.num_nodes)]
    degree = [len(row) + row.count(v) for v, row in enumerate(neighbours)]  # a self loop counts twice
    order, visited = [], set()
    for seed in sorted(range(graph.num_nodes), key=lambda v: (degree[v], v)):
        if seed in visited:
            continue
        visited.add(seed)
        queue = deque([seed])
        while queue:
            node = queue.popleft()
            order.append(node)
            new = [u for u in neighbours[node] if u not in visited]
            visited.update(new)
            queue.extend(sorted(new, key=degree.__getitem__))
    return order


def test_the_search_given_scipys_entry_nodes_is_scipys_order(awkward_graph):
    """scipy enters components in its own (unstable) sort of the degrees, of the CSR's
    index type; given those entry nodes the compiled search returns scipy's order exactly,
    on graphs with self loops, isolated nodes, hubs of new neighbours past the insertion
    sort's limit, and degree ties everywhere."""
    hub = 0
    star = graph_of(np.full(40, hub), np.arange(1, 41), 41, "star")  # 40 new neighbours at once
    for graph in (awkward_graph, grid_graph(), star, ring_with_a_pendant()):
        degree = degrees(graph)
        scipy_seeds = np.argsort(degree.astype(sp.csr_matrix(graph.adjacency()).indices.dtype))
        ours = cuthill_mckee(graph.indptr, graph.indices, degree, scipy_seeds)[::-1]
        np.testing.assert_array_equal(ours, scipy_rcm(graph), err_msg=graph.name)


def test_the_order_is_the_definition(awkward_graph):
    """Entry nodes by (degree, id): the order written out plainly, on a graph with several
    components, self loops and ties."""
    assert rcm_order(awkward_graph)[::-1].tolist() == cuthill_mckee_by_definition(awkward_graph)
    assert rcm_order(grid_graph(12))[::-1].tolist() == cuthill_mckee_by_definition(grid_graph(12))


@pytest.mark.parametrize("num_parts", [2, 7, 64, 400])
def test_parts_are_scipys_order_cut_into_mixgcns_ranges(num_parts):
    """Independent reference: scipy's RCM of a connected graph whose search can start at one
    node only, each part filled position by position from MixGCN's bounds."""
    graph = ring_with_a_pendant()
    n = graph.num_nodes
    order = scipy_rcm(graph)
    expected = np.full(n, -1)
    for part in range(num_parts):
        for position in range(n * part // num_parts, n * (part + 1) // num_parts):
            expected[order[position]] = part
    partition = rcm_partition(graph, num_parts)
    np.testing.assert_array_equal(partition.parts, expected)
    assert (partition.parts >= 0).all() and partition.sizes.sum() == n
    assert partition.sizes.max() - partition.sizes.min() <= 1
    # The renumbering gives rank i MixGCN's rows floor(N·i/P) .. floor(N·(i+1)/P) - 1,
    # each part's nodes in their original order.
    np.testing.assert_array_equal(partition.offsets, [n * part // num_parts for part in range(num_parts + 1)])
    for part in range(num_parts):
        members = partition.new_to_old[partition.offsets[part]:partition.offsets[part + 1]]
        assert (np.diff(members) > 0).all()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A prepared synthetic-tiny graph directory."""
    graph_dir = tmp_path_factory.mktemp("rcm") / "g"
    assert run_cli("prepare", "synthetic-tiny", "--out", graph_dir).returncode == 0
    return graph_dir


def test_a_shuffled_path_gets_bandwidth_1_back_and_parts_are_stretches_of_it():
    """Hand-worked: 12 nodes into 5 parts take floor(12·i/5) = 0, 2, 4, 7, 9, 12, so 2, 2,
    3, 2, 3 nodes; RCM walks the path from one end, so each part is a stretch of
    consecutive path nodes and only the 4 edges between stretches are cut."""
    graph, path = shuffled_path(12)
    order = rcm_order(graph)
    position = np.empty(12, dtype=int)
    position[order] = np.arange(12)
    assert sorted(np.abs(np.diff(position[path]))) == [1] * 11  # bandwidth 1: neighbours on the path stay adjacent
    partition = rcm_partition(graph, 5)
    along_path = partition.parts[path]
    assert along_path.tolist() in ([0, 0, 1, 1, 2, 2, 2, 3, 3, 4, 4, 4], [4, 4, 4, 3, 3, 2, 2, 2, 1, 1, 0, 0])
    assert partition.sizes.tolist() == [2, 2, 3, 2, 3]
    assert edge_cut(graph, partition.parts) == 4


def test_the_partition_is_deterministic(tmp_path):
    first = run_partition(grid_graph(), "h", 6, tmp_path / "a", constraints=("nodes",), engine=RCM)
    second = run_partition(grid_graph(), "h", 6, tmp_path / "b", constraints=("nodes",), engine=RCM)
    assert first["partition_hash"] == second["partition_hash"]
    assert np.array_equal(np.load(tmp_path / "a" / "parts.npy"), np.load(tmp_path / "b" / "parts.npy"))


def test_64_bit_ids_give_the_same_order(awkward_graph):
    """A graph stored with 64-bit ids (past 2^31 nodes) is searched as it is, in the same order."""
    wide = dataclasses.replace(awkward_graph, indices=awkward_graph.indices.astype(np.int64))
    assert awkward_graph.indices.dtype == np.int32
    np.testing.assert_array_equal(rcm_order(wide), rcm_order(awkward_graph))


@pytest.mark.parametrize(("option", "value", "words"), [
    ("constraints", ("nodes", "in_degree", "train"), 'RCM\'s equal row ranges balance the vertex count alone: '
     'partition.constraints (--constraints) cannot be ["nodes", "in_degree", "train"] — set it to ["nodes"] or [], '
     'or partition.engine to metis or kaminpar'),
    ("seed", 3, "RCM's order is deterministic, without a seed: partition.seed (--seed) cannot be 3 — set it to 0, "
     "or partition.engine to metis or kaminpar"),
    ("edge_fraction", 0.5, "RCM orders the whole graph: partition.edge_fraction (--edge-fraction) cannot be 0.5 — "
     "set it to 1, or partition.engine to metis"),
])
def test_options_rcm_cannot_honour_are_refused_with_the_fix(tmp_path, option, value, words):
    """Each refused option names the engines that take it: an edge fraction only METIS."""
    options = {"constraints": ("nodes",), "seed": 0, "edge_fraction": 1.0, option: value}
    with pytest.raises(SuperGCNError) as raised:
        run_partition(grid_graph(), "h", 2, tmp_path / "p", engine=RCM, **options)
    assert str(raised.value).startswith(words)
    assert not (tmp_path / "p").exists()


def test_separate_constraints_are_refused_naming_only_metis(tmp_path):
    """KaMinPar cannot keep them separate either, so the fix names METIS alone."""
    with pytest.raises(SuperGCNError, match="RCM balances no vertex weights: partition.separate_constraints "
                       "\\(--separate-constraints\\) cannot be false — set it to null, or partition.engine to metis"):
        run_partition(grid_graph(), "h", 2, tmp_path / "p", constraints=("nodes",),
                      engine=Engine("rcm", separate_constraints=False))


def test_the_command_line_partitions_with_rcm_and_the_preprocessing_table_shows_it(tiny, tmp_path):
    result = run_cli("partition", "--graph", tiny, "--parts", 4, "--out", tmp_path / "p4", "--engine", "rcm",
                     "--constraints", "nodes")
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "p4" / "partition.json").read_text())
    assert manifest["engine"] == {"name": "rcm", "method": "equal row ranges of the reverse Cuthill-McKee order",
                                  "threads": 1}
    assert manifest["constraints"] == ["nodes"] and manifest["metis_edge_fraction"] is None
    assert manifest["seconds"] > 0 and manifest["peak_memory_mib"] > 0
    meta = json.loads((tiny / "meta.json").read_text())
    partition, _ = load_partition(tmp_path / "p4", meta["hash"], meta["num_nodes"])
    n = meta["num_nodes"]
    np.testing.assert_array_equal(partition.sizes, np.diff([n * part // 4 for part in range(5)]))
    (row,) = preprocessing_table([tiny], [tmp_path / "p4"], []).query("step != 'prepare'").itertuples()
    assert (row.step, row.P, row.seconds, row.edge_cut) == ("partition (rcm)", 4, manifest["seconds"],
                                                            manifest["edge_cut"])
    assert pd.isna(row.bytes_per_entry), "a tiny graph's peak is the interpreter's, not per entry"


def test_the_command_line_refuses_the_default_constraints_in_one_line(tiny, tmp_path):
    result = run_cli("partition", "--graph", tiny, "--parts", 4, "--out", tmp_path / "p", "--engine", "rcm")
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "partition.constraints (--constraints) cannot be" in result.stderr
    assert 'set it to ["nodes"] or []' in result.stderr
    assert not (tmp_path / "p").exists()
