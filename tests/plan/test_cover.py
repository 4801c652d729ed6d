import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from supergcn.plan.cover import minimum_vertex_cover, minimum_weighted_vertex_cover


def random_biadjacency(rng, left, right, density):
    return sp.random(left, right, density=density, random_state=rng, format="csr", data_rvs=np.ones)


@pytest.mark.parametrize("seed", range(25))
def test_cover_is_minimum_against_networkx(seed):
    rng = np.random.default_rng(seed)
    left, right = rng.integers(1, 30, 2)
    b = random_biadjacency(rng, left, right, rng.uniform(0.02, 0.4))
    cover = minimum_vertex_cover(b)

    rows, cols = b.nonzero()
    assert np.all(cover.left[rows] | cover.right[cols]), "an edge is not covered"
    assert cover.size == cover.matching_size

    g = nx.Graph()
    g.add_nodes_from((("L", i) for i in range(left)), bipartite=0)
    g.add_nodes_from((("R", j) for j in range(right)), bipartite=1)
    g.add_edges_from((("L", int(i)), ("R", int(j))) for i, j in zip(rows, cols))
    top = [("L", i) for i in range(left)]
    matching = nx.bipartite.hopcroft_karp_matching(g, top_nodes=top)
    oracle = nx.bipartite.to_vertex_cover(g, matching, top_nodes=top)
    assert cover.size == len(oracle)


def test_cover_of_hand_worked_example():
    # The paper's Fig. 4/5: remote sources 4,5,6 on S1 feed local destinations 1,2,3 on S0:
    # 4 -> 1, 4 -> 2, 4 -> 3, 5 -> 2, 6 -> 2. Cover {4, 2}: node 4 POST, node 2 PRE.
    sources, destinations = [4, 5, 6], [1, 2, 3]
    edges = [(4, 1), (4, 2), (4, 3), (5, 2), (6, 2)]
    b = sp.csr_matrix((np.ones(len(edges)), ([sources.index(u) for u, _ in edges],
                                              [destinations.index(v) for _, v in edges])), shape=(3, 3))
    cover = minimum_vertex_cover(b)
    assert cover.left.tolist() == [True, False, False]
    assert cover.right.tolist() == [False, True, False]


def test_empty_graph_has_empty_cover():
    cover = minimum_vertex_cover(sp.csr_matrix((4, 3)))
    assert cover.size == 0 and cover.matching_size == 0


def networkx_cheapest_cover_cost(b, left_cost, right_cost):
    """The cheapest cover's cost as networkx's own minimum cut of the cover's flow network."""
    g = nx.DiGraph()
    rows, cols = b.nonzero()
    g.add_edges_from((("s", ("L", i)) for i in range(b.shape[0])), capacity=left_cost)
    g.add_edges_from(((("R", j), "t") for j in range(b.shape[1])), capacity=right_cost)
    g.add_edges_from((("L", int(i)), ("R", int(j))) for i, j in zip(rows, cols))  # no capacity: unbounded
    return nx.minimum_cut_value(g, "s", "t") if len(rows) else 0


@pytest.mark.parametrize("seed", range(25))
def test_weighted_cover_is_cheapest_against_networkx(seed):
    rng = np.random.default_rng(100 + seed)
    left, right = rng.integers(1, 40, 2)
    b = random_biadjacency(rng, left, right, rng.uniform(0.02, 0.4))
    left_cost, right_cost = (int(c) for c in rng.integers(1, 300, 2))
    cover = minimum_weighted_vertex_cover(b, left_cost, right_cost)
    rows, cols = b.nonzero()
    assert np.all(cover.left[rows] | cover.right[cols]), "an edge is not covered"
    cost = left_cost * int(cover.left.sum()) + right_cost * int(cover.right.sum())
    assert cost == networkx_cheapest_cover_cost(b, left_cost, right_cost)
    assert cover.matching_size == minimum_vertex_cover(b).matching_size


def test_weighted_cover_of_hand_worked_example():
    # Fig. 4/5 again (4 -> 1, 2, 3; 5 -> 2; 6 -> 2). A POST row (left) at 3 and a PRE row
    # (right) at 1: {4 POST, 2 PRE} costs 4, every destination PRE {1, 2, 3} costs 3.
    b = sp.csr_matrix((np.ones(5), ([0, 0, 0, 1, 2], [0, 1, 2, 1, 1])), shape=(3, 3))
    cover = minimum_weighted_vertex_cover(b, 3, 1)
    assert cover.left.tolist() == [False, False, False] and cover.right.tolist() == [True, True, True]
    # At 1 and 3 the other way round, every source POST {4, 5, 6} costs 3 against 1 + 3.
    cover = minimum_weighted_vertex_cover(b, 1, 3)
    assert cover.left.tolist() == [True, True, True] and cover.right.tolist() == [False, False, False]
    # Equal costs: König's cover.
    cover = minimum_weighted_vertex_cover(b, 5, 5)
    assert cover.left.tolist() == [True, False, False] and cover.right.tolist() == [False, True, False]


def test_weighted_cover_refuses_what_it_cannot_cut():
    with pytest.raises(ValueError, match="positive integers"):
        minimum_weighted_vertex_cover(sp.csr_matrix((2, 2)), 0, 1)
    with pytest.raises(ValueError, match="int32"):
        minimum_weighted_vertex_cover(sp.identity(3, format="csr"), 2**30 + 1, 2**30)
