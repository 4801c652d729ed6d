"""DistGNN-MB's neighbour sampler (supergcn.kernels.sampling): uniform without replacement
by chi-square tests, every neighbour where the fan-out allows, halos as leaves, the same
blocks at one and two threads and other blocks for other keys, the full-fan-out blocks
against networkx's and scipy's k-hop neighbourhoods, and int64 arithmetic past 2^32."""

import itertools

import networkx as nx
import numba
import numpy as np
import pytest
from scipy import stats

from supergcn.data.graph import build_graph
from supergcn.kernels.sampling import (
    Block,
    choose_offsets,
    row_pointers,
    sample_blocks,
    sorted_unique,
    splitmix64,
    stream_key,
)
from supergcn.methods.distgnn_mb.graph import PartitionGraph

#: The p-value below which a chi-square test fails. Where the statistic follows its
#: chi-square law (every expected count here is 1,000 or more), a correct sampler fails
#: one test with probability 1e-8, and the two tests together with less than 1e-7.
P_VALUE_FLOOR = 1e-8
#: A graph worked by hand (tests/methods/test_distgnn_mb_graph.py's): parts 0, 1, 2; node 8
#: (part 1) touches only nodes of part 1. Rows (sorted neighbours):
#: 0: 1 2 7 | 1: 0 2 6 8 | 2: 0 1 3 6 | 3: 2 4 8 | 4: 3 4 5 7 | 5: 4 6 | 6: 1 2 5 | 7: 0 4 | 8: 1 3
HAND_EDGES = [(0, 1), (0, 2), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (2, 6), (1, 6), (4, 4), (0, 7), (4, 7),
              (1, 8), (3, 8)]
HAND_PARTS = np.array([0, 1, 0, 1, 0, 1, 2, 0, 1])
#: Mini-batch keys (seed, rank, epoch, step) of the chi-square draws: fixed, so the tests
#: are deterministic.
KEYS = [(7, 0, epoch, step) for epoch in range(2) for step in range(2)]


def local_graph(src, dst, num_nodes: int, parts=None, rank: int = 0, owned=None) -> PartitionGraph:
    """Rank ``rank``'s sampling graph of the symmetric graph of ``src`` -> ``dst`` under
    ``parts`` (one part when None), its nodes ``owned`` in that order (increasing when None)."""
    empty = np.zeros(num_nodes, dtype=bool)
    graph = build_graph("test", np.asarray(src), np.asarray(dst), np.zeros((num_nodes, 1)), np.zeros(num_nodes),
                        empty, empty, empty)
    parts = np.zeros(num_nodes, dtype=np.int64) if parts is None else np.asarray(parts)
    owned = np.flatnonzero(parts == rank) if owned is None else owned
    return PartitionGraph.from_graph(graph, parts, int(parts.max()) + 1, rank, owned)


def bipartite(num_centres: int, degree: int) -> PartitionGraph:
    """Centres 0 .. C-1, each adjacent to the same leaves C .. C+d-1 (one part)."""
    centres = np.repeat(np.arange(num_centres), degree)
    leaves = num_centres + np.tile(np.arange(degree), num_centres)
    return local_graph(centres, leaves, num_centres + degree)


def random_graph(edges: int, num_nodes: int = 3000) -> PartitionGraph:
    """One part of a graph of ``edges`` random edges (duplicates merged)."""
    rng = np.random.default_rng(0)
    return local_graph(rng.integers(0, num_nodes, edges), rng.integers(0, num_nodes, edges), num_nodes)


def drawn_leaves(num_centres: int, degree: int, fanout: int) -> np.ndarray:
    """(draws x fanout) leaf numbers 0 .. d-1 drawn by every centre under every key."""
    graph = bipartite(num_centres, degree)
    draws = []
    for key in KEYS:
        (block,) = sample_blocks(graph, np.arange(num_centres), [fanout], key)
        leaves = graph.global_ids[block.src[block.indices]] - num_centres
        draws.append(leaves.reshape(num_centres, fanout))
    return np.concatenate(draws)


def test_each_neighbour_is_drawn_with_the_same_probability():
    """k = 4 of d = 10 neighbours, 20,000 draws: each neighbour is in a draw with probability
    k/d, 8,000 times expected. The counts of one draw are not multinomial: for a uniform
    k-subset Cov(c_i, c_j) = -p(1-p)/(d-1) (p = k/d), so Pearson's statistic X² (what
    scipy's chisquare computes against equal counts) tends to (d-k)/(d-1) · χ²(d-1), and
    X² (d-1)/(d-k) to χ²(d-1), which gives the p-value."""
    degree, fanout = 10, 4
    leaves = drawn_leaves(5000, degree, fanout)
    counts = np.bincount(leaves.ravel(), minlength=degree)
    statistic = stats.chisquare(counts).statistic * (degree - 1) / (degree - fanout)
    assert stats.chi2.sf(statistic, degree - 1) > P_VALUE_FLOOR, counts


def test_every_subset_is_drawn_with_the_same_probability():
    """k = 3 of d = 6 neighbours, 20,000 draws: each of the C(6, 3) = 20 subsets is one
    outcome of a categorical draw, 1,000 times expected, and X² tends to χ²(19)."""
    degree, fanout = 6, 3
    leaves = drawn_leaves(5000, degree, fanout)
    subsets = {subset: number for number, subset in enumerate(itertools.combinations(range(degree), fanout))}
    counts = np.bincount([subsets[tuple(draw)] for draw in leaves.tolist()], minlength=len(subsets))
    assert stats.chisquare(counts).pvalue > P_VALUE_FLOOR, counts


def rows_of(graph: PartitionGraph, nodes) -> list[list[int]]:
    return [graph.indices[graph.indptr[v]:graph.indptr[v + 1]].tolist() for v in nodes]


def test_draws_never_repeat_a_neighbour_and_take_all_where_the_fanout_allows():
    """Every destination's draw lists its neighbours in the order of its row: all of them
    where its degree is at most the fan-out, else the fan-out's count of distinct ones."""
    graph = random_graph(edges=30000)
    fanouts = [3, 8, 12]
    blocks = sample_blocks(graph, np.arange(0, 3000, 7), fanouts, (1, 0, 0, 0))
    for block, fanout in zip(blocks, fanouts):
        for i, row in enumerate(rows_of(graph, block.dst)):
            drawn = block.src[block.indices[block.indptr[i]:block.indptr[i + 1]]].tolist()
            if len(row) <= fanout:
                assert drawn == row
            else:
                positions = [row.index(u) for u in drawn]  # rows here hold no node twice
                assert len(drawn) == fanout and positions == sorted(set(positions))
        assert any(len(row) > fanout for row in rows_of(graph, block.dst))


def check_layering(graph: PartitionGraph, blocks: list[Block], seeds) -> None:
    """DGL's block conventions with halos as leaves (the module docstring)."""
    assert blocks[-1].dst.tolist() == list(seeds)
    for earlier, later in zip(blocks, blocks[1:]):
        assert earlier.dst.tolist() == later.src[:later.num_solid].tolist()
    for block in blocks:
        assert (block.src[:block.num_solid] < graph.num_owned).all()
        assert (block.src[block.num_solid:] >= graph.num_owned).all()
        assert len(np.unique(block.src)) == len(block.src)
        new = block.src[block.num_dst:]
        assert (np.diff(new) > 0).all()
        assert block.indptr[-1] == len(block.indices) and (block.indices < len(block.src)).all()


def test_halos_are_leaves_never_destinations_and_never_expanded():
    """Rank 0 of the hand-worked graph: node 8 is a neighbour of halos 1 and 3 only, so no
    depth of full fan-out reaches it."""
    src, dst = np.array(HAND_EDGES).T
    graph = local_graph(src, dst, 9, HAND_PARTS)
    blocks = sample_blocks(graph, np.arange(graph.num_owned), [-1] * 4, (0, 0, 0, 0))
    check_layering(graph, blocks, range(graph.num_owned))
    for block in blocks:
        assert 8 not in graph.global_ids[block.src].tolist()
        assert set(graph.global_ids[block.src[block.num_solid:]]) == {1, 3, 5, 6}


def test_the_hand_worked_blocks_of_node_7():
    """Seed node 7 (local 1) of rank 0 of the hand-worked graph, fan-outs (all, 10): 7's
    row 0 4 (local 2 0), then rows 1: 2 0, 0: 5 0 6 1 (node 4), 2: 4 3 1 (node 0); rank 0
    holds nodes 4, 7, 0, 2 as local 0..3 and halos 1, 3, 5, 6 as 4..7."""
    src, dst = np.array(HAND_EDGES).T
    graph = local_graph(src, dst, 9, HAND_PARTS, owned=np.array([4, 7, 0, 2]))
    first, last = sample_blocks(graph, [1], [-1, 10], (3, 1, 4, 1))
    assert (last.num_dst, last.num_solid, last.src.tolist()) == (1, 3, [1, 0, 2])
    assert (last.indptr.tolist(), last.indices.tolist()) == ([0, 2], [2, 1])
    assert (first.num_dst, first.num_solid, first.src.tolist()) == (3, 4, [1, 0, 2, 3, 4, 5, 6])
    assert first.indptr.tolist() == [0, 2, 6, 9]
    assert first.indices.tolist() == [2, 1, 5, 1, 6, 0, 4, 3, 0]


@pytest.mark.parametrize("fanout", [-1, 40])
def test_full_fanout_blocks_are_the_k_hop_neighbourhoods(fanout):
    """Rank 1 of 3 of a random graph (its nodes in a shuffled order), fan-out at least
    every degree: block l's destinations are the rank's nodes that networkx finds within
    L-1-l hops of the seeds over the full graph's edges that leave the rank's nodes (halos
    are not expanded), its sources all nodes within L-l hops, and its edges those of the
    full graph (scipy) into its destinations; all in original ids."""
    rng = np.random.default_rng(3)
    num_nodes, rank = 400, 1
    empty = np.zeros(num_nodes, dtype=bool)
    full = build_graph("test", rng.integers(0, num_nodes, 700), rng.integers(0, num_nodes, 700),
                       np.zeros((num_nodes, 1)), np.zeros(num_nodes), empty, empty, empty)
    parts = rng.integers(0, 3, num_nodes)
    owned = rng.permutation(np.flatnonzero(parts == rank))
    graph = PartitionGraph.from_graph(full, parts, 3, rank, owned)
    adjacency = full.adjacency()
    assert adjacency.getnnz(axis=1).max() <= 40
    reach = nx.DiGraph()
    reach.add_nodes_from(range(num_nodes))
    reach.add_edges_from((int(v), int(u)) for v in owned for u in adjacency[v].indices)
    seeds = rng.choice(len(owned), 6, replace=False)
    blocks = sample_blocks(graph, seeds, [fanout] * 3, (0, 1, 2, 3))
    check_layering(graph, blocks, seeds)
    hops = nx.multi_source_dijkstra_path_length(reach, set(owned[seeds].tolist()))
    for layer, block in enumerate(blocks):
        depth = len(blocks) - 1 - layer
        dst, src = graph.global_ids[block.dst], graph.global_ids[block.src]
        assert set(dst.tolist()) == {v for v, hop in hops.items() if hop <= depth and parts[v] == rank}
        assert set(src.tolist()) == {v for v, hop in hops.items() if hop <= depth + 1}
        edges = {(int(v), int(src[p])) for i, v in enumerate(dst)
                 for p in block.indices[block.indptr[i]:block.indptr[i + 1]]}
        assert edges == {(int(v), int(u)) for v in dst for u in adjacency[v].indices}


def blocks_digest(blocks: list[Block]) -> list[list[int]]:
    return [array.tolist() for block in blocks for array in (block.src, block.indptr, block.indices)]


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="numba has one thread here")
def test_the_same_key_gives_the_same_blocks_at_one_and_two_threads():
    graph = random_graph(edges=40000)
    seeds = np.arange(0, 3000, 3)
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = blocks_digest(sample_blocks(graph, seeds, [5, 10, 15], (11, 2, 3, 4)))
        numba.set_num_threads(2)
        two = blocks_digest(sample_blocks(graph, seeds, [5, 10, 15], (11, 2, 3, 4)))
    finally:
        numba.set_num_threads(threads)
    assert one == two


def test_other_keys_give_other_blocks():
    graph = random_graph(edges=40000)
    seeds = np.arange(0, 3000, 3)
    reference = blocks_digest(sample_blocks(graph, seeds, [5, 10], (11, 2, 3, 4)))
    assert blocks_digest(sample_blocks(graph, seeds, [5, 10], (11, 2, 3, 4))) == reference
    for other in [(12, 2, 3, 4), (11, 3, 3, 4), (11, 2, 4, 4), (11, 2, 3, 5), (-11, 2, 3, 4)]:
        assert blocks_digest(sample_blocks(graph, seeds, [5, 10], other)) != reference, other


def splitmix64_reference(state: int) -> tuple[int, int]:
    """Vigna's splitmix64.c ``next()`` in Python integers: (new state, output)."""
    mask = (1 << 64) - 1
    state = (state + 0x9E3779B97F4A7C15) & mask
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return state, z ^ (z >> 31)


def test_the_hash_is_splitmix64_and_the_key_folds_its_four_parts():
    assert splitmix64(np.uint64(0)) == 0xE220A8397B1DCDAF  # splitmix64.c's first output from 0
    folded = 0
    for part in (5, 0, 2**63 + 1, (-3) % 2**64):
        folded = splitmix64_reference(folded ^ part)[1]
    assert int(stream_key((5, 0, 2**63 + 1, -3))) == folded


@pytest.mark.parametrize("values", [np.array([], dtype=np.int64), np.array([5, 5, 5]),
                                    np.random.default_rng(0).integers(-50, 50, 1000)])
def test_sorted_unique_is_numpys_unique(values):
    assert sorted_unique(values).tolist() == np.unique(values).tolist()


def test_row_pointers_sum_in_int64_past_two_to_the_32():
    counts = np.array([2**31 - 1, 2**31 - 1, 3], dtype=np.int32)
    pointers = row_pointers(counts)
    assert pointers.dtype == np.int64 and pointers.tolist() == [0, 2**31 - 1, 2**32 - 2, 2**32 + 1]


def test_offsets_of_rows_longer_than_two_to_the_32_are_drawn_in_int64():
    """A row of 3 · 2^32 + 5 entries: 8 offsets per stream, distinct, sorted, within the
    row, and past 2^32 about two thirds of the time (int32 or uint32 offsets never are)."""
    degree, count = 3 * 2**32 + 5, 8
    drawn = np.empty((200, count), dtype=np.int64)
    state = 1
    for row in drawn:
        state, word = splitmix64_reference(state)
        choose_offsets(degree, count, np.uint64(word), row)
    assert (np.diff(drawn, axis=1) > 0).all() and drawn.min() >= 0 and drawn.max() < degree
    assert 0.6 < (drawn >= 2**32).mean() < 0.73


def test_floyd_draws_every_offset_when_the_count_is_the_degree():
    out = np.empty(9, dtype=np.int64)
    choose_offsets(9, 9, np.uint64(123), out)
    assert out.tolist() == list(range(9))


@pytest.mark.parametrize("seeds, fanouts, key, message", [
    ([0, 1], [], (0, 0, 0, 0), "fan-outs"),
    ([0, 1], [5, -2], (0, 0, 0, 0), "fan-outs"),
    ([0, 0], [5], (0, 0, 0, 0), "distinct solid"),
    ([-1], [5], (0, 0, 0, 0), "distinct solid"),
    ([4], [5], (0, 0, 0, 0), "distinct solid"),  # local 4 is a halo
    ([0.5], [5], (0, 0, 0, 0), "integer local ids"),
    ([0], [5], (0, 0, 0), "four integers"),
    ([0], [5], (0, 0, 0, 0.5), "four integers"),
])
def test_refusals(seeds, fanouts, key, message):
    src, dst = np.array(HAND_EDGES).T
    with pytest.raises(ValueError, match=message):
        sample_blocks(local_graph(src, dst, 9, HAND_PARTS), seeds, fanouts, key)
