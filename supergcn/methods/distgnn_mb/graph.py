"""DistGNN-MB's sampling graph of one rank: its solid nodes and, as leaves, their halos.

DistGNN-MB (Vasimuddin et al., §3.1-3.2) samples each rank's mini-batches on its own
partition only. With part(u) the part of node u (original ids), rank r and its owned
nodes o_0, ..., o_{n-1} in the plan's order (the trainer's row order), the halo nodes are::

    H = {u : u in N(o_i) for some i, part(u) != r},   sorted: h_0 < h_1 < ... < h_{h-1},

and the local ids are L(o_i) = i (solid) and L(h_k) = n + k (halo). The adjacency keeps
row i = (L(u) for u in N(o_i)), in the graph's order, for the solid nodes only: a halo
carries no features and is never expanded, so it has no row. ``degree[L(u)]`` = deg u, the
size of N(u) in the full graph (a solid row's length; a halo's read from the graph's
pointers), the degree DistGNN-MB's push draws by.

``boundary[j]`` = sorted {i : part(u) = j for some u in N(o_i)} for j != r (empty for
j = r): the solid nodes that are halos on rank j (the graph is symmetric, so o_i is in
N(u) of a solid node u of j), DistGNN-MB's db_halo, the only nodes whose embeddings rank
j's cache can use.

Memory, built: 8 bytes per adjacency entry (``indices``, int64), plus per solid node 24
bytes (``indptr``, ``global_ids``, ``degree``), per halo 20 (``global_ids``, ``degree``,
``halo_owner``) and 8 per (solid node, peer) pair of ``boundary``. Building adds, at its
peak, 1 byte per entry (a mask) and about 24 per entry that names a halo (their ids, then
their (owner, row) pairs, gathered and sorted; 23.6 and 23.8 measured by tracemalloc on
random graphs cut in 2 and 8); no array has one entry per node of the whole graph, so
the graph and the partition can stay memory-mapped. Pointers are int64 throughout.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from supergcn.errors import SuperGCNError
from supergcn.kernels.jit import njit, prange
from supergcn.kernels.sampling import row_pointers, sorted_unique

_REBUILD = "the plan and the partition disagree: rerun `supergcn plan` on this partition"


@njit(parallel=True, nogil=True, cache=True)
def _gather_rows(graph_indptr, graph_indices, owned, indptr, out):
    """Row ``owned[i]`` of the graph into ``out[indptr[i]:indptr[i + 1]]``, as int64."""
    for i in prange(len(owned)):
        start = graph_indptr[owned[i]]
        first = indptr[i]
        for k in range(indptr[i + 1] - first):
            out[first + k] = graph_indices[start + k]


@njit(parallel=True, nogil=True, cache=True)
def _localise_solid(indptr, indices, sorted_owned, owned_position):
    """In place: an owned original id u becomes its local id; any other becomes -1 - u."""
    for i in prange(len(indptr) - 1):
        for e in range(indptr[i], indptr[i + 1]):
            u = indices[e]
            found = np.searchsorted(sorted_owned, u)
            if found < len(sorted_owned) and sorted_owned[found] == u:
                indices[e] = owned_position[found]
            else:
                indices[e] = -1 - u


@njit(parallel=True, nogil=True, cache=True)
def _localise_halo(indptr, indices, halo):
    """In place: each -1 - u left by :func:`_localise_solid` becomes n + (u's rank in ``halo``)."""
    num_owned = len(indptr) - 1
    for i in prange(num_owned):
        for e in range(indptr[i], indptr[i + 1]):
            if indices[e] < 0:
                indices[e] = num_owned + np.searchsorted(halo, -1 - indices[e])


@dataclass(frozen=True)
class PartitionGraph:
    """Rank ``rank``'s sampling graph (module docstring); ids are local unless said.

    Args:
        rank: the rank, r.
        indptr: CSR pointers of the solid rows (int64, n + 1).
        indices: the solid rows' neighbours (int64 local ids).
        global_ids: the original id of every local id (int64, n + h).
        halo_owner: the rank owning each halo (int32, h).
        degree: every local id's full-graph degree (int64, n + h).
        boundary: per rank j, the solid nodes that are halos on j (int64 local ids,
            sorted; none for j = r).
    """

    rank: int
    indptr: np.ndarray
    indices: np.ndarray
    global_ids: np.ndarray
    halo_owner: np.ndarray
    degree: np.ndarray
    boundary: tuple[np.ndarray, ...]

    @property
    def num_owned(self) -> int:
        """Solid nodes, n."""
        return len(self.indptr) - 1

    @property
    def num_halo(self) -> int:
        """Halo nodes, h."""
        return len(self.halo_owner)

    @classmethod
    def from_graph(cls, graph, parts: np.ndarray, num_parts: int, rank: int,
                   owned_old_ids: np.ndarray) -> "PartitionGraph":
        """Build rank ``rank``'s sampling graph from the full graph's rows of its nodes.

        Args:
            graph: the prepared :class:`~supergcn.data.graph.Graph` (symmetric CSR over
                original ids; may be memory-mapped).
            parts: the part of every node, original ids (``parts.npy``; may be mapped).
            num_parts: the number of parts, P.
            rank: this rank, r.
            owned_old_ids: the original ids of the nodes r owns, in the plan's order
                (``RankPlan.owned_old_ids``).

        Returns:
            The rank's graph.

        Raises:
            SuperGCNError: the owned ids repeat, fall outside the graph or the partition
                puts one on another rank, or a neighbour the partition puts on r is
                missing from them (the plan belongs to another partition).
        """
        owned = np.ascontiguousarray(owned_old_ids, dtype=np.int64)
        owned_position = np.argsort(owned, kind="stable")
        sorted_owned = owned[owned_position]
        _check_owned(sorted_owned, parts, rank, graph.num_nodes)
        graph_indptr = np.asarray(graph.indptr)
        indptr = row_pointers(graph_indptr[owned + 1] - graph_indptr[owned])
        indices = np.empty(int(indptr[-1]), dtype=np.int64)
        _gather_rows(graph_indptr, np.asarray(graph.indices), owned, indptr, indices)
        _localise_solid(indptr, indices, sorted_owned, owned_position)
        halo = sorted_unique(-1 - indices[indices < 0])
        _localise_halo(indptr, indices, halo)
        halo_owner = np.asarray(parts[halo]).astype(np.int32)
        if (halo_owner == rank).any():
            missing = halo[halo_owner == rank]
            raise SuperGCNError(f"rank {rank} does not own nodes the partition gives it ({len(missing):,} neighbours "
                                f"of its nodes, the first {int(missing[0])})", _REBUILD)
        degree = np.concatenate([np.diff(indptr), graph_indptr[halo + 1] - graph_indptr[halo]])
        return cls(rank=int(rank), indptr=indptr, indices=indices, global_ids=np.concatenate([owned, halo]),
                   halo_owner=halo_owner, degree=degree,
                   boundary=_boundary(indptr, indices, halo_owner, num_parts))


def _check_owned(sorted_owned: np.ndarray, parts: np.ndarray, rank: int, num_nodes: int) -> None:
    """Refuse owned ids (sorted) that repeat, fall outside the graph or lie on another part."""
    problem = None
    if len(sorted_owned) and (sorted_owned[0] < 0 or sorted_owned[-1] >= num_nodes):
        problem = f"names nodes outside the graph's 0..{num_nodes - 1}"
    elif (sorted_owned[1:] == sorted_owned[:-1]).any():
        problem = "names a node twice"
    elif (np.asarray(parts[sorted_owned]) != rank).any():
        problem = f"names nodes the partition puts on other ranks than {rank}"
    if problem is not None:
        raise SuperGCNError(f"rank {rank}'s list of owned nodes {problem}", _REBUILD)


def _boundary(indptr: np.ndarray, indices: np.ndarray, halo_owner: np.ndarray,
              num_parts: int) -> tuple[np.ndarray, ...]:
    """``boundary[j]`` of the module docstring: the solid rows with an entry naming a halo
    of rank j, found through the (row, owner) pairs of the halo entries alone."""
    num_owned = len(indptr) - 1
    halo_entries = np.flatnonzero(indices >= num_owned)
    # pair = owner * n + row, as (owner * n - 1) + (the row's end pointer's index)
    pairs = halo_owner[indices[halo_entries] - num_owned].astype(np.int64) * num_owned - 1
    pairs += np.searchsorted(indptr, halo_entries, side="right")
    del halo_entries  # freed before the sort's copy: 8 bytes less per halo entry at the peak
    pairs = sorted_unique(pairs)
    edges = np.searchsorted(pairs, np.arange(num_parts + 1, dtype=np.int64) * num_owned)
    return tuple(pairs[edges[j]:edges[j + 1]] - j * num_owned for j in range(num_parts))
