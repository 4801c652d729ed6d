"""Building every rank's plan for a strategy: pre, post or hybrid (SuperGCN §5.2).

``pre`` serves all cut edges PRE (rows sent j->i = distinct destinations), ``post`` all
POST (= distinct sources), and ``hybrid`` (Alg. 1) takes a minimum vertex cover C of each
pair's bipartite cut graph: an edge is POST when u ∈ C, otherwise PRE (then v ∈ C). Rows
sent j->i = ``|C|`` = maximum matching size (König), the fewest possible. Where a PRE row
costs more than a POST row (GAT's, :mod:`supergcn.models.gat.online_softmax`), ``row_costs``
makes the cover a cheapest one under those costs instead
(:func:`~supergcn.plan.cover.minimum_weighted_vertex_cover`). (PRE, POST and the
buffers: :mod:`supergcn.plan.rank_plan`.)

Two passes, so that memory follows the largest rank's share, not the graph:

1. **Receiving** (:func:`_receive`), one destination rank i at a time, reading only its
   rows of the graph. Everything rank i receives depends on its own incoming edges alone —
   the pairs (j -> i) are cut from i's rows, and so are their minimum covers — so the
   pass writes rank i's receiving side (local and remote CSR) to the scratch directory
   and appends what each sender j sends it (PRE rows, POST rows) to files there
   (:class:`~supergcn.plan.pieces.SenderPieces`). Its steps: the rank's incoming edges
   grouped by sender (:func:`_incoming`), which (sender, source) groups are POST
   (:func:`_post_groups`), the rows each sender sends (:func:`_rows_sent`), and the
   receiving side's operators (:func:`_receiving_side`).
2. **Sending** (:func:`_assemble`), one sender j at a time: its pieces in destination
   order with its receiving side, emitted as its :class:`~supergcn.plan.rank_plan.RankPlan`.

Besides one rank's edges, the builder holds the N-long renumbering (two arrays of the
graph's index type). Within a pair, cut edges are in (destination, source) order: the
rank's edges come so sorted, and a stable sort by the sender keeps it. Keys sender * n +
dst are then sorted, which is the order of the PRE rows; the (sender, source) groups need
a sort of their own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from supergcn.data.graph import Graph, check_neighbours_in_range
from supergcn.data.keys import group_sorted
from supergcn.data.storage import release_pages, save_npz_columns
from supergcn.errors import SuperGCNError
from supergcn.kernels.ranges import block_starts, concatenated_ranges, csr_pointers
from supergcn.naming import STRATEGIES
from supergcn.partition.partition import Partition
from supergcn.plan.cover import MAX_CAPACITY, minimum_vertex_cover, minimum_weighted_vertex_cover
from supergcn.plan.pieces import SenderPieces
from supergcn.plan.rank_plan import RankPlan
from supergcn.plan.statistics import PAIR_STATISTICS, plan_totals
from supergcn.progress import tracked

#: Most cut edges matched in one call of scipy's Hopcroft–Karp, which indexes with int32.
MATCHING_MAX_ENTRIES = 2**31 - 1


@dataclass
class _Ranks:
    """What both passes read: the graph, its partition, the renumbering and each node's owner."""

    graph: Graph
    partition: Partition
    new_to_old: np.ndarray
    old_to_new: np.ndarray
    owner: np.ndarray

    @classmethod
    def of(cls, graph: Graph, partition: Partition) -> "_Ranks":
        ids = graph.indices.dtype
        num_ranks = partition.num_parts
        owner = np.repeat(np.arange(num_ranks, dtype=np.int16 if num_ranks <= 2**15 else np.int64), partition.sizes)
        return cls(graph, partition, partition.new_to_old.astype(ids), partition.old_to_new.astype(ids), owner)

    @property
    def num_ranks(self) -> int:
        return self.partition.num_parts

    @property
    def offsets(self) -> np.ndarray:
        return self.partition.offsets


@dataclass
class _CutEdges:
    """The edges into one rank from other ranks, in (sender, destination, source) order,
    with their (sender, source) groups (``left``: an edge's group, ``left_keys``: sender *
    n + source of each group) and (sender, destination) groups (``right``, ``right_keys``)."""

    sender: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    left_keys: np.ndarray
    left: np.ndarray
    right_keys: np.ndarray
    right: np.ndarray


def rank_edges(graph: Graph, partition: Partition, rank: int, old_to_new: np.ndarray,
               new_to_old: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The directed edges into ``rank``'s nodes: (destination as a local id 0..n_r-1,
    source as a new id), sorted by destination then source. Reads only the rank's rows of
    the (memory-mapped) graph.

    Args:
        graph: the prepared graph.
        partition: its partition.
        rank: the destination rank.
        old_to_new: the new id of every node (:attr:`~supergcn.partition.partition.Partition.old_to_new`).
        new_to_old: the original id of every new id.

    Returns:
        ``(dst, src)``, int64 local destination ids and new source ids, one per edge.

    Raises:
        SuperGCNError: a neighbour id of the rank's rows lies outside the graph's nodes.
    """
    lo, hi = int(partition.offsets[rank]), int(partition.offsets[rank + 1])
    old_rows = new_to_old[lo:hi]
    starts = graph.indptr[old_rows]
    degree = graph.indptr[old_rows + 1] - starts
    neighbours = graph.indices[concatenated_ranges(starts, degree)]
    check_neighbours_in_range(graph, neighbours, f"the rows of rank {rank}")
    src = old_to_new[neighbours]
    del neighbours
    # The rank's rows are scattered through the file: without this, one pass over the ranks
    # would leave the whole mapped adjacency resident.
    release_pages(graph.indptr, graph.indices)
    dst = np.repeat(np.arange(hi - lo, dtype=np.int64), degree)
    # Renumbering unsorted each row: sort by (dst, src); the keys are distinct, rows stay put.
    src = src[np.argsort(dst * graph.num_nodes + src)]
    return dst, src




def _unique_inverse(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True)`` through one argsort and :func:`group_sorted`."""
    order = np.argsort(keys)
    values, sorted_inverse = group_sorted(keys[order])
    inverse = np.empty_like(sorted_inverse)
    inverse[order] = sorted_inverse
    return values, inverse




def _left_in_cover(left_sender, left, right_sender, right, num_ranks, row_costs=None):
    """Alg. 1 for the pairs into one destination rank: the union of the pairs' bipartite
    cut graphs is one bipartite graph whose minimum cover is the union of the pairs'
    minimum covers. Left vertices are the (sender, source) groups, right ones the (sender,
    destination) groups; returns whether each left vertex is in the cover (its edges are
    then POST) and, per sender, the cover and matching sizes. With ``row_costs`` (a PRE
    row's, a POST row's) the cover is a cheapest one under them.

    The pairs are covered in batches of whole pairs of at most :data:`MATCHING_MAX_ENTRIES`
    cut edges, since scipy's Hopcroft–Karp indexes its matrix with 32-bit integers (and,
    weighted, few enough that a cut's capacity fits its int32 maximum flow);
    ``left`` and ``right`` come ordered by sender, and so do the groups.
    """
    edge_sender = left_sender[left]
    left_is_post = np.zeros(len(left_sender), dtype=bool)
    right_in_cover = np.zeros(len(right_sender), dtype=bool)
    left_matched = np.zeros(len(left_sender), dtype=bool)
    max_entries = MATCHING_MAX_ENTRIES
    if row_costs is not None:
        pre_cost, post_cost = row_costs
        max_entries = min(max_entries, (MAX_CAPACITY - 1) // (post_cost // math.gcd(pre_cost, post_cost)))
    for first, stop in _pair_batches(np.bincount(edge_sender, minlength=num_ranks), max_entries):
        e_lo, e_hi = np.searchsorted(edge_sender, [first, stop])
        l_lo, l_hi = np.searchsorted(left_sender, [first, stop])
        r_lo, r_hi = np.searchsorted(right_sender, [first, stop])
        biadjacency = sp.csr_matrix((np.ones(e_hi - e_lo, dtype=np.int8), (left[e_lo:e_hi] - l_lo,
                                                                           right[e_lo:e_hi] - r_lo)),
                                    shape=(l_hi - l_lo, r_hi - r_lo))
        cover = (minimum_vertex_cover(biadjacency) if row_costs is None
                 else minimum_weighted_vertex_cover(biadjacency, post_cost, pre_cost))
        left_is_post[l_lo:l_hi] = cover.left
        right_in_cover[r_lo:r_hi] = cover.right
        left_matched[l_lo:l_hi] = cover.match_of_left >= 0
    return left_is_post, {
        "cover": np.bincount(left_sender[left_is_post], minlength=num_ranks)
        + np.bincount(right_sender[right_in_cover], minlength=num_ranks),
        "matching": np.bincount(left_sender[left_matched], minlength=num_ranks),
    }




def _pair_batches(edges_per_pair: np.ndarray, max_entries: int):
    """Yield ``(first pair, last pair + 1)`` of consecutive pairs with at most ``max_entries``
    edges together; a pair with more cannot be matched and is refused."""
    too_large = np.flatnonzero(edges_per_pair > max_entries)
    if len(too_large):
        raise SuperGCNError(f"one pair of ranks shares {int(edges_per_pair[too_large[0]]):,} cut edges, more than "
                            f"the {max_entries:,} one maximum matching can index",
                            "partition into more parts, or plan with --strategy pre or post")
    ends = np.cumsum(edges_per_pair)
    first = 0
    while first < len(edges_per_pair):
        before = ends[first - 1] if first else 0
        stop = int(np.searchsorted(ends, before + max_entries, side="right"))
        yield first, stop
        first = stop




def _incoming(ranks: _Ranks, i: int) -> tuple[dict[str, np.ndarray], _CutEdges]:
    """Rank ``i``'s local CSR and in-degree, and its cut edges grouped by sender."""
    n, base = ranks.graph.num_nodes, int(ranks.offsets[i])
    num_owned = int(ranks.offsets[i + 1]) - base
    dst, src = rank_edges(ranks.graph, ranks.partition, i, ranks.old_to_new, ranks.new_to_old)
    src_owner = ranks.owner[src]
    is_local = src_owner == i
    local = {"local_indptr": csr_pointers(dst[is_local], num_owned),
             "local_indices": src[is_local].astype(np.int64) - base,
             "in_degree": np.bincount(dst, minlength=num_owned)}
    # numpy sorts 16-bit keys stably by radix, several times faster than wider ones.
    by_sender = np.argsort(src_owner[~is_local], kind="stable")
    cut_src = src[~is_local][by_sender].astype(np.int64)
    cut_dst = dst[~is_local][by_sender]
    del dst, src, src_owner, is_local, by_sender
    sender = ranks.owner[cut_src].astype(np.int64)
    right_keys, right = group_sorted(sender * n + cut_dst)
    left_keys, left = _unique_inverse(sender * n + cut_src)
    return local, _CutEdges(sender, cut_src, cut_dst, left_keys, left, right_keys, right)


def _post_groups(strategy: str, cut: _CutEdges, n: int, num_ranks: int, row_costs=None) -> tuple[np.ndarray, dict]:
    """Whether each (sender, source) group is served POST under ``strategy``, and for
    hybrid each sender's cover and matching sizes."""
    if strategy == "pre":
        return np.zeros(len(cut.left_keys), dtype=bool), {}
    if strategy == "post":
        return np.ones(len(cut.left_keys), dtype=bool), {}
    return _left_in_cover(cut.left_keys // n, cut.left, cut.right_keys // n, cut.right, num_ranks, row_costs)


def _rows_sent(cut: _CutEdges, left_is_post: np.ndarray, n: int, num_ranks: int) -> dict[str, np.ndarray]:
    """The rows each sender sends rank i: PRE partial rows, one per (sender, destination)
    with a PRE edge (entries already in (sender, dst, src) order), then POST raw rows, one
    per (sender, source) in the cover; their counts and their rows of i's receive buffer."""
    is_post = left_is_post[cut.left]
    pre_keys, pre_row = group_sorted(cut.sender[~is_post] * n + cut.dst[~is_post])
    post_keys = cut.left_keys[left_is_post]
    pre_sender, post_sender = pre_keys // n, post_keys // n
    pre_counts = np.bincount(pre_sender, minlength=num_ranks)
    post_counts = np.bincount(post_sender, minlength=num_ranks)
    recv_start = block_starts(pre_counts + post_counts)
    return {"is_post": is_post, "pre_keys": pre_keys, "pre_row": pre_row, "post_keys": post_keys,
            "post_row_of_edge": (np.cumsum(left_is_post) - 1)[cut.left[is_post]],
            "pre_counts": pre_counts, "post_counts": post_counts,
            "pre_position": recv_start[pre_sender] + np.arange(len(pre_keys)) - block_starts(pre_counts)[pre_sender],
            "post_position": (recv_start[post_sender] + pre_counts[post_sender] + np.arange(len(post_keys))
                              - block_starts(post_counts)[post_sender])}


def _receiving_side(cut: _CutEdges, rows: dict[str, np.ndarray], n: int, num_owned: int) -> dict[str, np.ndarray]:
    """Rank i's remote CSR (owned destination <- receive-buffer row, for PRE rows and POST
    edges) and its receive counts. Every (destination, position) is distinct, so one key
    orders them as a lexsort would."""
    recv_counts = rows["pre_counts"] + rows["post_counts"]
    remote_dst = np.concatenate([rows["pre_keys"] % n, cut.dst[rows["is_post"]]])
    remote_pos = np.concatenate([rows["pre_position"], rows["post_position"][rows["post_row_of_edge"]]])
    order = np.argsort(remote_dst * max(1, int(recv_counts.sum())) + remote_pos)
    return {"remote_indptr": csr_pointers(remote_dst[order], num_owned), "remote_indices": remote_pos[order],
            "recv_counts": recv_counts}


def _sending_side(cut: _CutEdges, rows: dict[str, np.ndarray], cover_stats: dict, ranks: _Ranks):
    """What rank i's pass leaves for its senders (:meth:`SenderPieces.add`): the senders
    with cut edges into i, each one's share of the pieces, the pieces (PRE row lengths and
    sources, POST sources, in the sender's local ids) and the pair's statistics."""
    n, num_ranks, offsets = ranks.graph.num_nodes, ranks.num_ranks, ranks.offsets
    is_post = rows["is_post"]
    pre_counts, post_counts = rows["pre_counts"], rows["post_counts"]
    cut_per_sender = np.bincount(cut.sender, minlength=num_ranks)
    active = np.flatnonzero(cut_per_sender)
    post_sender = rows["post_keys"] // n
    stats = {"cut_edges": cut_per_sender[active], "rows": (pre_counts + post_counts)[active],
             "pre_rows": pre_counts[active], "post_rows": post_counts[active],
             "distinct_sources": np.bincount(cut.left_keys // n, minlength=num_ranks)[active],
             "distinct_destinations": np.bincount(cut.right_keys // n, minlength=num_ranks)[active],
             **{name: values[active] for name, values in cover_stats.items()}}
    counts = {"pre_lengths": pre_counts[active],
              "pre_sources": np.bincount(cut.sender[~is_post], minlength=num_ranks)[active],
              "post_sources": post_counts[active]}
    pieces = {"pre_lengths": np.bincount(rows["pre_row"], minlength=len(rows["pre_keys"])),
              "pre_sources": cut.src[~is_post] - offsets[cut.sender[~is_post]],
              "post_sources": rows["post_keys"] % n - offsets[post_sender]}
    return active, counts, pieces, stats


def _receive(ranks: _Ranks, i: int, strategy: str, scratch_dir: Path, senders: SenderPieces, row_costs=None) -> int:
    """Pass 1 for destination rank ``i`` (module docstring); the rows it receives."""
    n = ranks.graph.num_nodes
    local, cut = _incoming(ranks, i)
    left_is_post, cover_stats = _post_groups(strategy, cut, n, ranks.num_ranks, row_costs)
    rows = _rows_sent(cut, left_is_post, n, ranks.num_ranks)
    receiving = _receiving_side(cut, rows, n, len(local["in_degree"]))
    np.savez(scratch_dir / f"receiver-{i}.npz", **local, **receiving)
    senders.add(i, *_sending_side(cut, rows, cover_stats, ranks))
    return int(receiving["recv_counts"].sum())


def _assemble(ranks: _Ranks, j: int, scratch_dir: Path, senders: SenderPieces) -> RankPlan:
    """Pass 2 for sender rank ``j``: its pieces in destination order and its receiving side."""
    num_ranks, offsets = ranks.num_ranks, ranks.offsets
    pair = senders.records(j)
    send_pre_counts = np.zeros(num_ranks, dtype=np.int64)
    send_post_counts = np.zeros(num_ranks, dtype=np.int64)
    send_pre_counts[pair["dst"]] = pair["pre_rows"]
    send_post_counts[pair["dst"]] = pair["post_rows"]
    gathered = senders.pieces(pair)
    with np.load(scratch_dir / f"receiver-{j}.npz") as receiver:
        receiving = {name: receiver[name] for name in receiver.files}
    (scratch_dir / f"receiver-{j}.npz").unlink()
    return RankPlan(rank=j, num_ranks=num_ranks, offset=int(offsets[j]),
                    pre_indptr=np.concatenate([[0], np.cumsum(gathered["pre_lengths"])]).astype(np.int64),
                    pre_indices=gathered["pre_sources"], send_pre_counts=send_pre_counts,
                    post_send_index=gathered["post_sources"], send_post_counts=send_post_counts,
                    owned_old_ids=ranks.new_to_old[offsets[j]:offsets[j + 1]], **receiving)


def plan_ranks(graph: Graph, partition: Partition, strategy: str, scratch_dir: str | Path,
               emit: Callable[[RankPlan], None], pairs_path: Path, row_costs: tuple[int, int] | None = None) -> dict:
    """Build every rank's communication plan for ``strategy`` in two passes (module
    docstring), hand each to ``emit`` in rank order and write the per-pair statistics
    (:data:`supergcn.plan.statistics.PAIR_STATISTICS`, and for hybrid the cover and matching
    sizes) to ``pairs_path``, one row per ordered pair (j sends to i) with cut edges, in
    (j, i) order.

    Args:
        graph: the prepared graph.
        partition: its partition; part r is rank r.
        strategy: ``pre``, ``post`` or ``hybrid`` (:data:`supergcn.naming.STRATEGIES`).
        scratch_dir: an existing directory for the pieces between the passes (emptied at
            the end).
        emit: called with each :class:`~supergcn.plan.rank_plan.RankPlan`, rank 0 first.
        pairs_path: the ``.npz`` file of per-pair statistics to write.
        row_costs: hybrid only: what a PRE row and a POST row cost (positive integers),
            for a cheapest cover under them; None (or equal costs) for the fewest rows.

    Returns:
        The totals recorded in ``plan.json`` (:func:`supergcn.plan.statistics.plan_totals`).

    Raises:
        SuperGCNError: an unknown strategy, or a pair of ranks with more cut edges than
            one maximum matching can index.
    """
    if strategy not in STRATEGIES:
        raise SuperGCNError(f"unknown strategy {strategy!r}", f"choose one of {', '.join(STRATEGIES)}")
    if row_costs is not None and (strategy != "hybrid" or min(row_costs) < 1):
        raise SuperGCNError(f"row costs {row_costs} for strategy {strategy}",
                            "give row costs, positive integers, to the hybrid strategy only")
    if row_costs is not None and row_costs[0] == row_costs[1]:
        row_costs = None  # König's cover is the cheapest
    ranks = _Ranks.of(graph, partition)
    scratch_dir = Path(scratch_dir)
    senders = SenderPieces(scratch_dir, graph.indices.dtype)
    received_by = np.array([_receive(ranks, i, strategy, scratch_dir, senders, row_costs)
                            for i in tracked(range(ranks.num_ranks), f"plan {strategy}: receiving sides", unit="rank")],
                           dtype=np.int64)
    senders.finish(ranks.num_ranks)
    sent_by = np.zeros(ranks.num_ranks, dtype=np.int64)
    for j in tracked(range(ranks.num_ranks), f"plan {strategy}: sending sides, written", unit="rank"):
        plan = _assemble(ranks, j, scratch_dir, senders)
        sent_by[j] = plan.send_counts.sum()
        emit(plan)
    names = [*PAIR_STATISTICS, *(("cover", "matching") if strategy == "hybrid" else ())]
    save_npz_columns(pairs_path, names, senders.column)
    totals = plan_totals(strategy, ranks.num_ranks, senders.column, sent_by, received_by, row_costs)
    senders.remove()
    return totals
