import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from supergcn.partition.cover import minimum_vertex_cover


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
