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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import maximum_bipartite_matching

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
