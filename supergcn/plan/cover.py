"""Minimum vertex cover of a bipartite graph (König's theorem).

Given the biadjacency matrix B (rows = left vertices L, columns = right vertices R) and a
maximum matching M, let Z be the vertices reachable from the unmatched left vertices by
alternating paths (left -> right along any edge, right -> left along a matching edge).
Then

    C = (L \\ Z) ∪ (R ∩ Z)

is a vertex cover and ``|C| = |M|`` (König 1931), hence minimum. The maximum matching comes
from ``scipy.sparse.csgraph.maximum_bipartite_matching`` (Hopcroft–Karp); the alternating
search is a breadth-first search compiled with numba, linear in the number of edges.
A disjoint union of bipartite graphs can be handled in one call: matchings, reachability
and covers all decompose over connected components.

Weighted (:func:`minimum_weighted_vertex_cover`): with a cost ``a`` per left vertex and ``b``
per right vertex, a cheapest cover is a minimum s-t cut of the network s -> l (capacity a),
l -> r (unbounded, one per edge), r -> t (capacity b): a finite cut cuts no l -> r edge, so
every edge has its left end on the sink side or its right end on the source side, and

    C = (L outside S) ∪ (R inside S),   S = what s reaches in the residual network,

costs the cut's capacity, the maximum flow (scipy's Dinic). With ``a == b`` it is König's cover.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, maximum_bipartite_matching, maximum_flow

from supergcn.kernels.jit import njit


@dataclass
class VertexCover:
    left: np.ndarray        # bool per left vertex: in the cover
    right: np.ndarray       # bool per right vertex: in the cover
    match_of_left: np.ndarray  # matched right vertex of each left vertex, -1 if unmatched

    @property
    def size(self) -> int:
        return int(self.left.sum() + self.right.sum())

    @property
    def matching_size(self) -> int:
        return int(np.count_nonzero(self.match_of_left >= 0))


@njit(cache=True)
def _alternating_reach(indptr, indices, match_of_left, match_of_right):
    num_left = len(indptr) - 1
    reached_left = np.zeros(num_left, dtype=np.bool_)
    reached_right = np.zeros(len(match_of_right), dtype=np.bool_)
    queue = np.empty(num_left, dtype=np.int64)
    tail = 0
    for u in range(num_left):
        if match_of_left[u] < 0:
            reached_left[u] = True
            queue[tail] = u
            tail += 1
    head = 0
    while head < tail:
        u = queue[head]
        head += 1
        for k in range(indptr[u], indptr[u + 1]):
            w = indices[k]
            if reached_right[w]:
                continue
            reached_right[w] = True
            partner = match_of_right[w]
            # partner < 0 would be an augmenting path: impossible for a maximum matching.
            if partner >= 0 and not reached_left[partner]:
                reached_left[partner] = True
                queue[tail] = partner
                tail += 1
    return reached_left, reached_right


def minimum_vertex_cover(biadjacency: sp.csr_matrix) -> VertexCover:
    """Minimum vertex cover of the bipartite graph with the given L x R biadjacency."""
    biadjacency = sp.csr_matrix(biadjacency)
    num_left, num_right = biadjacency.shape
    match_of_left = maximum_bipartite_matching(biadjacency, perm_type="column").astype(np.int64)
    match_of_right = np.full(num_right, -1, dtype=np.int64)
    matched = match_of_left >= 0
    match_of_right[match_of_left[matched]] = np.flatnonzero(matched)
    reached_left, reached_right = _alternating_reach(biadjacency.indptr.astype(np.int64),
                                                     biadjacency.indices.astype(np.int64),
                                                     match_of_left, match_of_right)
    return VertexCover(left=~reached_left, right=reached_right, match_of_left=match_of_left)


#: The largest capacity scipy's maximum flow takes (its capacities are int32).
MAX_CAPACITY = 2**31 - 1


def minimum_weighted_vertex_cover(biadjacency: sp.csr_matrix, left_cost: int, right_cost: int) -> VertexCover:
    """A cheapest vertex cover of the bipartite graph with the given L x R biadjacency, each
    left vertex costing ``left_cost`` and each right one ``right_cost`` (module docstring);
    its ``match_of_left`` is a maximum matching's, as :func:`minimum_vertex_cover` gives.

    Args:
        biadjacency: the L x R biadjacency.
        left_cost: a left vertex's cost, a positive integer.
        right_cost: a right vertex's cost, a positive integer.

    Returns:
        The cover.

    Raises:
        ValueError: a cost below 1, or a graph whose cut capacities exceed int32 (cover it
            in parts: the cover of a disjoint union is the union of the covers).
    """
    if min(left_cost, right_cost) < 1:
        raise ValueError(f"vertex costs must be positive integers, not {left_cost} and {right_cost}")
    unweighted = minimum_vertex_cover(biadjacency)
    if left_cost == right_cost:
        return unweighted
    common = math.gcd(left_cost, right_cost)
    left_cost, right_cost = left_cost // common, right_cost // common
    biadjacency = sp.csr_matrix(biadjacency)
    num_left, num_right = biadjacency.shape
    unbounded = min(left_cost * num_left, right_cost * num_right) + 1  # above any cut's capacity
    if unbounded > MAX_CAPACITY:
        raise ValueError(f"a cut of {num_left:,} + {num_right:,} vertices at costs {left_cost}:{right_cost} exceeds "
                         "int32 capacities: cover the graph in parts")
    source, sink = 0, num_left + num_right + 1
    rows, columns = biadjacency.nonzero()
    tails = np.concatenate([np.zeros(num_left, dtype=np.int64), 1 + rows, 1 + num_left + np.arange(num_right)])
    heads = np.concatenate([1 + np.arange(num_left), 1 + num_left + columns, np.full(num_right, sink)])
    capacity = np.concatenate([np.full(num_left, left_cost), np.full(len(rows), unbounded),
                               np.full(num_right, right_cost)]).astype(np.int32)
    # The reverse of every arc, at capacity 0, so that the residual network has its entries.
    network = sp.csr_matrix((np.concatenate([capacity, np.zeros(len(capacity), dtype=np.int32)]),
                             (np.concatenate([tails, heads]), np.concatenate([heads, tails]))),
                            shape=(sink + 1, sink + 1))
    network.sum_duplicates()
    flow = maximum_flow(network, source, sink, method="dinic").flow
    residual = (network - flow).tocsr()
    residual.data = (residual.data > 0).astype(np.int8)
    residual.eliminate_zeros()
    reached = np.zeros(sink + 1, dtype=bool)
    reached[breadth_first_order(residual, source, return_predecessors=False)] = True
    return VertexCover(left=~reached[1:num_left + 1], right=reached[num_left + 1:sink],
                       match_of_left=unweighted.match_of_left)
