"""Reverse Cuthill–McKee row blocks: MixGCN's assignment of nodes to ranks.

MixGCN (its §3.1 and Table 5) does not partition the graph: it orders the nodes by
reverse Cuthill–McKee (RCM; Cuthill and McKee 1969) and gives rank i the positions

    floor(N·i / P) .. floor(N·(i+1) / P) − 1

of that order, so that parts hold floor(N/P) or ceil(N/P) nodes: the node count is
balanced exactly, in-degree and training nodes not at all. RCM narrows the bandwidth
``max over edges {u, v} of abs(pos(u) − pos(v))`` (a path graph, shuffled, gets bandwidth
1 back), so most neighbours fall in the same or a nearby block.

The Cuthill–McKee order, as ``scipy.sparse.csgraph.reverse_cuthill_mckee`` computes it
but for ties among the entry nodes: with deg(v) the number of v's neighbours (a self loop
counting twice, as scipy counts it), each connected component in turn is entered at its
unvisited node of least degree (ties: the smaller id); a breadth-first search then takes
the nodes in order and appends each one's neighbours not yet visited, sorted by degree
(ties: the order of its adjacency row, increasing id). RCM is that order reversed. The
search is compiled here (:func:`cuthill_mckee`) rather than taken from scipy, for three
reasons. scipy sorts each node's new neighbours by insertion, O(k²) for a node reaching
k new ones: on ``synthetic-products`` at 1/4 scale (a hub of 230,792 neighbours) scipy
took 66–77 s where this takes 3.0–3.5 s with its pass over the degrees, the orders equal
(run by turns on the development machine's 2 busy cores). scipy picks the entry nodes by an
unstable sort, whose order among equal degrees is the sort implementation's choice; this
one is stable, so a graph gives the same partition whatever numpy sorts with. And scipy
holds the interpreter lock for its whole call, which silences the step's heartbeat. Given
scipy's entry nodes, the search returns scipy's order (``tests/partition/test_rcm.py``).
Time ``O(E + sum over v of k(v) log k(v))`` for k(v) the new nodes v reaches. The search
reads the graph's arrays as stored (32- or 64-bit ids, 64-bit offsets), so a graph past
2^31 entries is not copied; memory beyond the memory-mapped graph, whose pages stay
resident while the search runs (released after): arrays of at most 8 B per node (degrees,
their stable sort, the order, the visited flags, the parts).

Renumbering: :class:`~supergcn.partition.partition.Partition` numbers each part's nodes
by their original ids (a stable sort by part), not by their RCM positions. MixGCN's
mixture of parallelism needs only that rank i owns the contiguous new ids
floor(N·i/P) .. floor(N·(i+1)/P) − 1, which this gives: the order inside a block changes
no row's sum, so correctness does not depend on it. The RCM order inside a block
matters only to MixGCN's accelerator pipeline (§3.2, chunks of a block processed in RCM
order), which this package does not model.
"""

from __future__ import annotations

import numpy as np

from supergcn.data.graph import Graph, adjacency_blocks
from supergcn.data.storage import release_pages
from supergcn.kernels.jit import njit, read_only
from supergcn.kernels.ranges import even_bounds
from supergcn.partition.partition import Partition, check_num_parts
from supergcn.progress import running

#: New neighbours of one node up to this many are sorted by insertion (no allocation; the
#: common case), more by a merge sort (O(k log k) for a hub's k).
INSERTION_SORT_LIMIT = 16


def degrees(graph: Graph) -> np.ndarray:
    """deg(v) as Cuthill–McKee sorts by it: v's row length, plus one where the row holds
    v's self loop (stored once, counted twice), read a block of rows at a time.

    Args:
        graph: the prepared graph.

    Returns:
        int64 degrees (n).

    Raises:
        SuperGCNError: a neighbour id lies outside the graph's nodes (checked here, before
            the search indexes with it unchecked).
    """
    degree = np.diff(graph.indptr).astype(np.int64)
    for start, stop, rows, indices in adjacency_blocks(graph, what="partition: RCM, degrees"):
        degree[start:stop] += np.bincount(rows[indices == rows] - start, minlength=stop - start)
    return degree


def cuthill_mckee(indptr: np.ndarray, indices: np.ndarray, degree: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """The Cuthill–McKee order (module docstring) of the CSR ``indptr``, ``indices``.

    The arrays reach the compiled search read-only, whether the graph was memory-mapped
    or built in memory: one compilation per index width (jit.read_only).

    Args:
        indptr: n + 1 row offsets.
        indices: the neighbour ids, each row sorted.
        degree: deg(v) of every node (:func:`degrees`).
        seeds: every node, in the order the components are entered by: the first
            unvisited one starts the next component.

    Returns:
        The node at each position (int64, n), not reversed.
    """
    return _cuthill_mckee(*map(read_only, (indptr, indices, degree, seeds)))


@njit(cache=True, nogil=True)
def _cuthill_mckee(indptr, indices, degree, seeds):
    n = len(indptr) - 1
    visited = np.zeros(n, dtype=np.bool_)
    order = np.empty(n, dtype=np.int64)
    count = 0
    for seed in seeds:
        if visited[seed]:
            continue
        visited[seed] = True
        order[count] = seed
        count += 1
        level_start, level_end = count - 1, count
        while level_start < level_end:
            for position in range(level_start, level_end):
                node = order[position]
                first_new = count
                for entry in range(indptr[node], indptr[node + 1]):
                    neighbour = indices[entry]
                    if not visited[neighbour]:
                        visited[neighbour] = True
                        order[count] = neighbour
                        count += 1
                if count - first_new > INSERTION_SORT_LIMIT:
                    found = order[first_new:count].copy()
                    order[first_new:count] = found[np.argsort(degree[found], kind="mergesort")]
                else:
                    # Stable: a node moves only past strictly larger degrees.
                    for placed in range(first_new + 1, count):
                        moving, slot = order[placed], placed
                        while slot > first_new and degree[order[slot - 1]] > degree[moving]:
                            order[slot] = order[slot - 1]
                            slot -= 1
                        order[slot] = moving
            level_start, level_end = level_end, count
        if count == n:
            break
    return order


def rcm_order(graph: Graph) -> np.ndarray:
    """The reverse Cuthill–McKee order of ``graph``'s nodes (module docstring), components
    entered by least degree, ties by id.

    Args:
        graph: the prepared graph (its adjacency is symmetric: :mod:`supergcn.data.graph`).

    Returns:
        The node at each position: a permutation of 0 .. n − 1 (int64).

    Raises:
        SuperGCNError: a neighbour id lies outside the graph's nodes.
    """
    degree = degrees(graph)
    seeds = np.argsort(degree, kind="stable")
    with running(f"partition: reverse Cuthill-McKee order of {graph.num_nodes:,} nodes"):
        order = cuthill_mckee(graph.indptr, graph.indices, degree, seeds)
    release_pages(graph.indptr, graph.indices)  # the search read every page; the steps after it read in blocks
    return order[::-1]


def rcm_partition(graph: Graph, num_parts: int) -> Partition:
    """MixGCN's RCM row blocks of ``graph``: the node at RCM position k goes to the part i
    with floor(N·i/P) <= k < floor(N·(i+1)/P) (:func:`~supergcn.kernels.ranges.even_bounds`), so every part holds
    floor(N/P) or ceil(N/P) nodes.

    Args:
        graph: the prepared graph.
        num_parts: P, between 1 and the number of nodes.

    Returns:
        The :class:`~supergcn.partition.partition.Partition`; its renumbering keeps each
        part's nodes in their original order (module docstring).

    Raises:
        SuperGCNError: ``num_parts`` is out of range, or a neighbour id lies outside the
            graph's nodes.
    """
    check_num_parts(graph, num_parts)
    order = rcm_order(graph)
    parts = np.empty(graph.num_nodes, dtype=np.int32)
    parts[order] = np.repeat(np.arange(num_parts, dtype=np.int32), np.diff(even_bounds(graph.num_nodes, num_parts)))
    return Partition(parts, num_parts)
