"""Per-rank communication plans: pre-, post- and hybrid aggregation (SuperGCN §5.2).

Ids are the renumbered ones of the partition: rank ``r`` owns ``offset .. offset+n_r-1``
and refers to them locally as ``0 .. n_r-1``. For a destination node v on rank i, the
mean aggregation splits into

    deg(v) * (ÂX)[v] = sum_{u in N(v), u on i} X[u] + sum_{j != i} sum_{u in N(v), u on j} X[u].

Every cut edge (u on j, v on i) is served in one of two ways:

* PRE — rank j sums all its pre-served sources of v into one partial row and sends it;
  rank i adds that row into v.
* POST — rank j sends u's row once; rank i adds it into every v it serves.

``pre`` serves all cut edges PRE (rows sent j->i = distinct destinations), ``post`` all
POST (= distinct sources), and ``hybrid`` (Alg. 1) takes a minimum vertex cover C of each
pair's bipartite cut graph: an edge is POST when u ∈ C, otherwise PRE (then v ∈ C). Rows
sent j->i = ``|C|`` = maximum matching size (König), the fewest possible.

Buffers. Rank j's send buffer holds, for each destination i in rank order, first its PRE
partial rows (ordered by destination id) and then its POST raw rows (ordered by source
id). Rank i's receive buffer is the concatenation over sources j of those chunks, so
Alltoallv with ``send_counts`` / ``recv_counts`` moves the data.

A :class:`RankPlan` holds (all ids local to the rank):

* ``local_indptr``/``local_indices`` — owned destinations -> owned sources;
* ``pre_indptr``/``pre_indices`` — PRE partial rows (all destinations, in send order) ->
  owned sources; ``send_pre_counts[i]`` of them go to rank i;
* ``post_send_index`` — owned sources sent raw, ``send_post_counts[i]`` to rank i;
* ``remote_indptr``/``remote_indices`` — owned destinations -> receive-buffer rows;
* ``recv_counts[j]`` — rows received from rank j; ``in_degree`` — global deg(v);
* ``owned_old_ids`` — the graph's own ids of the owned nodes, so a rank reads its rows of
  the graph without the partition (an N-long array) or its renumbering.

On disk a plan directory holds ``plan.json`` (totals: its size does not grow with P),
``pairs.npz`` (per pair of ranks with cut edges: rows sent, cut edges, distinct sources
and destinations, cover), ``rank_hashes.npy`` (one hash per rank file) and one
``rank_NNNNN.npz`` per rank, so that a training rank reads O(1) bytes besides its own file.
"""

from __future__ import annotations

import hashlib
import io
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from supergcn.data.graph import Graph, check_neighbours_in_range
from supergcn.data.keys import group_sorted
from supergcn.data.ranges import block_starts, concatenated_ranges
from supergcn.data.storage import (
    atomic_output_dir,
    file_digest,
    load_array,
    peak_memory_mib,
    read_json,
    release_pages,
    write_json,
)
from supergcn.errors import SuperGCNError
from supergcn.naming import STRATEGIES
from supergcn.partition.cover import minimum_vertex_cover
from supergcn.partition.partition import Partition

#: Version 3 keeps per-pair statistics and rank-file hashes in arrays beside ``plan.json``
#: and the owned nodes' original ids in each rank file.
PLAN_FORMAT = "supergcn-plan/3"
_PAIRS_FILE = "pairs.npz"
#: The statistics ``pairs.npz`` holds for every pair with cut edges (hybrid adds cover, matching).
_PAIR_STATISTICS = ("src", "dst", "cut_edges", "rows", "pre_rows", "post_rows", "distinct_sources",
                    "distinct_destinations")
#: Most cut edges matched in one call of scipy's Hopcroft–Karp, which indexes with int32.
MATCHING_MAX_ENTRIES = 2**31 - 1
#: One hash per rank file, in rank order.
RANK_HASHES_FILE = "rank_hashes.npy"


@dataclass
class RankPlan:
    rank: int
    num_ranks: int
    offset: int
    local_indptr: np.ndarray
    local_indices: np.ndarray
    pre_indptr: np.ndarray
    pre_indices: np.ndarray
    send_pre_counts: np.ndarray
    post_send_index: np.ndarray
    send_post_counts: np.ndarray
    recv_counts: np.ndarray
    remote_indptr: np.ndarray
    remote_indices: np.ndarray
    in_degree: np.ndarray
    owned_old_ids: np.ndarray

    @property
    def num_owned(self) -> int:
        return len(self.local_indptr) - 1

    @property
    def send_counts(self) -> np.ndarray:
        return self.send_pre_counts + self.send_post_counts

    def contradiction(self) -> str | None:
        """What in this plan disagrees with the rest of it (counts of another length or
        below zero, a CSR whose pointers do not run from 0 to its entries, an index past
        its matrix), or None. The kernels index with these arrays unchecked."""
        n, ranks = self.num_owned, self.num_ranks
        for name in ("send_pre_counts", "send_post_counts", "recv_counts"):
            counts = getattr(self, name)
            if counts.shape != (ranks,) or (counts < 0).any():
                return f"{name} holds {counts.size} values, {int((counts < 0).sum())} below zero, not {ranks} counts"
        post_rows = int(self.send_post_counts.sum())
        for name, length in (("in_degree", n), ("owned_old_ids", n), ("post_send_index", post_rows)):
            if len(getattr(self, name)) != length:
                return f"{name} has {len(getattr(self, name)):,} entries, not {length:,}"
        if not _within(self.post_send_index, n):
            return f"post_send_index names owned nodes outside 0..{n - 1}"
        for name, indptr, indices, rows, columns in (
                ("local", self.local_indptr, self.local_indices, n, n),
                ("pre", self.pre_indptr, self.pre_indices, int(self.send_pre_counts.sum()), n),
                ("remote", self.remote_indptr, self.remote_indices, n, int(self.recv_counts.sum()))):
            if (len(indptr) != rows + 1 or indptr[0] != 0 or indptr[-1] != len(indices)
                    or (np.diff(indptr) < 0).any()):
                return f"the {name} CSR's pointers do not run from 0 to its {len(indices):,} entries over {rows:,} rows"
            if not _within(indices, columns):
                return f"the {name} CSR indexes columns outside 0..{columns - 1}"
        return None

    def send_positions(self) -> tuple[np.ndarray, np.ndarray]:
        """Rows of the send buffer that receive the PRE partial rows and the POST rows."""
        chunk_start = block_starts(self.send_counts)
        pre_pos = concatenated_ranges(chunk_start, self.send_pre_counts)
        post_pos = concatenated_ranges(chunk_start + self.send_pre_counts, self.send_post_counts)
        return pre_pos, post_pos

    def matrices(self) -> dict[str, sp.csr_matrix]:
        """The plan's operators as scipy CSR matrices with unit weights:

        * ``local`` (n x n): owned destinations <- owned sources;
        * ``send`` (send rows x n): each send-buffer row, a PRE row summing its sources or
          a POST row copying one source, in buffer order;
        * ``remote`` (n x received rows): owned destinations <- receive-buffer rows.
        """
        def csr(indptr, indices, num_cols):
            return sp.csr_matrix((np.ones(len(indices), dtype=np.float32), indices, indptr),
                                 shape=(len(indptr) - 1, num_cols))
        pre_pos, post_pos = self.send_positions()
        send_rows = np.concatenate([np.repeat(pre_pos, np.diff(self.pre_indptr)), post_pos])
        send_cols = np.concatenate([self.pre_indices, self.post_send_index]).astype(np.int64)
        send = sp.csr_matrix((np.ones(len(send_rows), dtype=np.float32), (send_rows, send_cols)),
                             shape=(int(self.send_counts.sum()), self.num_owned))
        return {"local": csr(self.local_indptr, self.local_indices, self.num_owned), "send": send,
                "remote": csr(self.remote_indptr, self.remote_indices, int(self.recv_counts.sum()))}


def _within(values: np.ndarray, upper: int) -> bool:
    """Whether every value lies in 0..upper-1."""
    return not len(values) or (int(values.min()) >= 0 and int(values.max()) < upper)


def rank_edges(graph: Graph, partition: Partition, rank: int, old_to_new: np.ndarray,
               new_to_old: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The directed edges into ``rank``'s nodes: (destination as a local id 0..n_r-1,
    source as a new id), sorted by destination then source. Reads only the rank's rows of
    the (memory-mapped) graph."""
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


def _left_in_cover(left_sender, left, right_sender, right, num_ranks):
    """Alg. 1 for the pairs into one destination rank: the union of the pairs' bipartite
    cut graphs is one bipartite graph whose minimum cover is the union of the pairs'
    minimum covers. Left vertices are the (sender, source) groups, right ones the (sender,
    destination) groups; returns whether each left vertex is in the cover (its edges are
    then POST) and, per sender, the cover and matching sizes.

    The pairs are matched in batches of whole pairs of at most :data:`MATCHING_MAX_ENTRIES`
    cut edges, since scipy's Hopcroft–Karp indexes its matrix with 32-bit integers;
    ``left`` and ``right`` come ordered by sender, and so do the groups.
    """
    edge_sender = left_sender[left]
    left_is_post = np.zeros(len(left_sender), dtype=bool)
    right_in_cover = np.zeros(len(right_sender), dtype=bool)
    left_matched = np.zeros(len(left_sender), dtype=bool)
    for first, stop in _pair_batches(np.bincount(edge_sender, minlength=num_ranks), MATCHING_MAX_ENTRIES):
        e_lo, e_hi = np.searchsorted(edge_sender, [first, stop])
        l_lo, l_hi = np.searchsorted(left_sender, [first, stop])
        r_lo, r_hi = np.searchsorted(right_sender, [first, stop])
        biadjacency = sp.csr_matrix((np.ones(e_hi - e_lo, dtype=np.int8), (left[e_lo:e_hi] - l_lo,
                                                                           right[e_lo:e_hi] - r_lo)),
                                    shape=(l_hi - l_lo, r_hi - r_lo))
        cover = minimum_vertex_cover(biadjacency)
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


def _csr_indptr(rows: np.ndarray, num_rows: int) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=num_rows))]).astype(np.int64)


_PIECES = ("pre_lengths", "pre_sources", "post_sources")
#: The per-pair record columns a sender's assembly reads.
_SENDER_COLUMNS = ("dst", "pre_rows", "post_rows", *(f"{name}_{end}" for name in _PIECES for end in ("start", "count")))


class _SenderPieces:
    """What each destination rank's pass leaves for the senders, appended to files in
    ``directory``: the PRE rows' lengths and sources and the POST rows' sources (local ids
    of the sender, in ``piece_dtype``), and one record per pair (j -> i) with cut edges —
    its statistics and where its pieces start — as int64 columns of their own.

    At P = 8,192 nearly every pair has cut edges (20 M pairs for 50 M adjacency entries), so
    the records stay on disk: :meth:`finish` rewrites each column in sender order, one
    column in memory at a time, and a sender's records are then one contiguous read, with
    no memory map whose pages would stay resident.
    """

    FILES = _PIECES

    def __init__(self, directory: Path, piece_dtype: np.dtype) -> None:
        self.directory = directory
        self.piece_dtype = piece_dtype
        self.files: dict[str, object] = {}
        self.written = dict.fromkeys(self.FILES, 0)
        self.bounds = np.zeros(1, dtype=np.int64)
        self.mapped: dict[str, np.ndarray] | None = None

    def _append(self, name: str, values: np.ndarray, dtype) -> None:
        if name not in self.files:
            self.files[name] = open(self.directory / f"{name}.bin", "wb")
        self.files[name].write(np.ascontiguousarray(values, dtype=dtype).tobytes())

    def add(self, receiver: int, senders: np.ndarray, counts: dict[str, np.ndarray], arrays: dict[str, np.ndarray],
            stats: dict[str, np.ndarray]) -> None:
        """``arrays`` hold the receiver's pieces in sender order, ``counts`` each sender's share."""
        record = {"src": senders, "dst": np.full(len(senders), receiver, dtype=np.int64), **stats}
        for name in self.FILES:
            record[f"{name}_start"] = self.written[name] + block_starts(counts[name])
            record[f"{name}_count"] = counts[name]
            self._append(name, arrays[name], self.piece_dtype)
            self.written[name] += int(counts[name].sum())
        for name, values in record.items():
            self._append(f"pair-{name}", values, np.int64)

    def _path(self, name: str) -> Path:
        return self.directory / f"{name}.bin"

    def finish(self, num_ranks: int) -> None:
        """Put every record column in sender order (stable: receivers ascending within a
        sender) and note where each sender's records start."""
        for handle in self.files.values():
            handle.close()
        order = np.argsort(np.fromfile(self._path("pair-src"), dtype=np.int64), kind="stable")
        for name in [name for name in self.files if name.startswith("pair-")]:
            np.fromfile(self._path(name), dtype=np.int64)[order].tofile(self._path(name))
        del order
        self.bounds = np.searchsorted(self.column("src"), np.arange(num_ranks + 1))

    def column(self, name: str) -> np.ndarray:
        """A record column, whole, in sender order."""
        return np.fromfile(self._path(f"pair-{name}"), dtype=np.int64)

    def records(self, sender: int) -> dict[str, np.ndarray]:
        """The :data:`_SENDER_COLUMNS` of ``sender``'s records, one read each."""
        lo, hi = int(self.bounds[sender]), int(self.bounds[sender + 1])
        return {name: np.fromfile(self._path(f"pair-{name}"), dtype=np.int64, count=hi - lo, offset=8 * lo)
                for name in _SENDER_COLUMNS}

    def pieces(self, records: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """A sender's pieces, in receiver order, as int64. The piece files stay mapped for
        the whole assembly (a sender's pieces lie in every receiver's block; mapping them
        anew per sender faulted each page P times): their pages, 4 B per piece below 2^31
        nodes, may all end up resident."""
        if self.mapped is None:
            self.mapped = {name: np.memmap(self._path(name), dtype=self.piece_dtype, mode="r")
                           if self.written[name] else np.empty(0, dtype=self.piece_dtype) for name in self.FILES}
        return {name: self.mapped[name][concatenated_ranges(records[f"{name}_start"], records[f"{name}_count"])]
                .astype(np.int64) for name in self.FILES}

    def remove(self) -> None:
        self.mapped = None
        for handle in self.files.values():
            Path(handle.name).unlink()


def plan_ranks(graph: Graph, partition: Partition, strategy: str, scratch_dir: str | Path,
               emit: Callable[[RankPlan], None], pairs_path: Path) -> dict:
    """Build every rank's communication plan for ``strategy`` (the module docstring's
    operators), hand each to ``emit`` in rank order and write the per-pair statistics to
    ``pairs_path``; return the totals.

    Memory follows the largest rank's share, not the graph: a first pass takes the
    destination ranks one at a time, reading only their rows of the graph. Everything a
    rank receives depends on its own incoming edges alone — the pairs (j -> i) into rank i
    are cut from i's rows, and so are their minimum covers — so the pass writes rank i's
    receiving side (local and remote CSR) to ``scratch_dir`` and appends what each sender
    j sends it (PRE rows, POST rows) to files there. A second pass assembles each sender's
    pieces in destination order with its receiving side and emits the rank's plan. Besides
    one rank's edges, the builder holds the N-long renumbering (two arrays of the graph's
    index type); the per-pair records and the senders' pieces stay on disk until each
    sender is assembled (:class:`_SenderPieces`).

    Within a pair, cut edges are in (destination, source) order: the rank's edges come so
    sorted, and a stable sort by the sender keeps it. Keys sender * n + dst are then sorted,
    which is the order of the PRE rows; the (sender, source) groups need a sort of their own.

    ``pairs_path`` gets, per ordered pair (j sends to i) with cut edges in (j, i) order,
    the cut edges, rows sent, PRE and POST rows, distinct sources (what post sends) and
    destinations (what pre sends), and for hybrid the cover and matching sizes.

    Returns:
        The totals recorded in ``plan.json``.
    """
    if strategy not in STRATEGIES:
        raise SuperGCNError(f"unknown strategy {strategy!r}", f"choose one of {', '.join(STRATEGIES)}")
    num_ranks, n = partition.num_parts, graph.num_nodes
    offsets = partition.offsets
    ids = graph.indices.dtype
    new_to_old = partition.new_to_old.astype(ids)
    old_to_new = partition.old_to_new.astype(ids)
    owner = np.repeat(np.arange(num_ranks, dtype=np.int16 if num_ranks <= 2**15 else np.int64), partition.sizes)
    scratch_dir = Path(scratch_dir)
    senders = _SenderPieces(scratch_dir, ids)
    received_by = np.zeros(num_ranks, dtype=np.int64)
    for i in range(num_ranks):
        base = int(offsets[i])
        num_owned = int(offsets[i + 1]) - base
        dst, src = rank_edges(graph, partition, i, old_to_new, new_to_old)
        in_degree = np.bincount(dst, minlength=num_owned)
        src_owner = owner[src]
        is_local = src_owner == i
        local_indptr = _csr_indptr(dst[is_local], num_owned)
        local_indices = src[is_local].astype(np.int64) - base
        # numpy sorts 16-bit keys stably by radix, several times faster than wider ones.
        by_sender = np.argsort(src_owner[~is_local], kind="stable")
        cut_src = src[~is_local][by_sender].astype(np.int64)
        cut_dst = dst[~is_local][by_sender]
        del dst, src, src_owner, is_local, by_sender
        sender = owner[cut_src].astype(np.int64)
        right_keys, right = group_sorted(sender * n + cut_dst)  # (sender, destination) groups
        left_keys, left = _unique_inverse(sender * n + cut_src)  # (sender, source) groups
        left_sender, right_sender = left_keys // n, right_keys // n
        cover_stats = {}
        if strategy == "pre":
            left_is_post = np.zeros(len(left_keys), dtype=bool)
        elif strategy == "post":
            left_is_post = np.ones(len(left_keys), dtype=bool)
        else:
            left_is_post, cover_stats = _left_in_cover(left_sender, left, right_sender, right, num_ranks)
        is_post = left_is_post[left]
        # PRE partial rows: one per (sender, destination); entries already in (sender, dst, src) order.
        pre_keys, pre_row = group_sorted(sender[~is_post] * n + cut_dst[~is_post])
        pre_row_sender, pre_row_dst = pre_keys // n, pre_keys % n
        # POST raw rows: one per (sender, source) in the cover.
        post_keys = left_keys[left_is_post]
        post_row_of_edge = (np.cumsum(left_is_post) - 1)[left[is_post]]
        post_row_sender, post_row_src = post_keys // n, post_keys % n
        pre_counts = np.bincount(pre_row_sender, minlength=num_ranks)
        post_counts = np.bincount(post_row_sender, minlength=num_ranks)
        recv_counts = pre_counts + post_counts
        received_by[i] = recv_counts.sum()
        recv_start = block_starts(recv_counts)
        pre_row_pos = recv_start[pre_row_sender] + np.arange(len(pre_keys)) - block_starts(pre_counts)[pre_row_sender]
        post_row_pos = (recv_start[post_row_sender] + pre_counts[post_row_sender] + np.arange(len(post_keys))
                        - block_starts(post_counts)[post_row_sender])
        # Receiver side: owned destination <- receive-buffer row, for PRE rows and POST edges.
        # Every (destination, position) is distinct, so one key orders them as a lexsort would.
        remote_dst = np.concatenate([pre_row_dst, cut_dst[is_post]])
        remote_pos = np.concatenate([pre_row_pos, post_row_pos[post_row_of_edge]])
        order = np.argsort(remote_dst * max(1, int(recv_counts.sum())) + remote_pos)
        np.savez(scratch_dir / f"receiver-{i}.npz", local_indptr=local_indptr, local_indices=local_indices,
                 remote_indptr=_csr_indptr(remote_dst[order], num_owned), remote_indices=remote_pos[order],
                 recv_counts=recv_counts, in_degree=in_degree)
        del remote_dst, remote_pos, order
        # Sender side, for every j with cut edges into i, in sender order.
        cut_per_sender = np.bincount(sender, minlength=num_ranks)
        active = np.flatnonzero(cut_per_sender)
        pre_entries = cut_src[~is_post] - offsets[sender[~is_post]]
        stats = {"cut_edges": cut_per_sender[active], "rows": recv_counts[active],
                 "pre_rows": pre_counts[active], "post_rows": post_counts[active],
                 "distinct_sources": np.bincount(left_sender, minlength=num_ranks)[active],
                 "distinct_destinations": np.bincount(right_sender, minlength=num_ranks)[active],
                 **{name: values[active] for name, values in cover_stats.items()}}
        senders.add(i, active, {"pre_lengths": pre_counts[active],
                                "pre_sources": np.bincount(sender[~is_post], minlength=num_ranks)[active],
                                "post_sources": post_counts[active]},
                    {"pre_lengths": np.bincount(pre_row, minlength=len(pre_keys)), "pre_sources": pre_entries,
                     "post_sources": post_row_src - offsets[post_row_sender]}, stats)
    senders.finish(num_ranks)
    sent_by = np.zeros(num_ranks, dtype=np.int64)
    for j in range(num_ranks):
        pair = senders.records(j)
        send_pre_counts = np.zeros(num_ranks, dtype=np.int64)
        send_post_counts = np.zeros(num_ranks, dtype=np.int64)
        send_pre_counts[pair["dst"]] = pair["pre_rows"]
        send_post_counts[pair["dst"]] = pair["post_rows"]
        sent_by[j] = send_pre_counts.sum() + send_post_counts.sum()
        gathered = senders.pieces(pair)
        with np.load(scratch_dir / f"receiver-{j}.npz") as receiver:
            receiving = {name: receiver[name] for name in receiver.files}
        (scratch_dir / f"receiver-{j}.npz").unlink()
        emit(RankPlan(rank=j, num_ranks=num_ranks, offset=int(offsets[j]),
                      pre_indptr=np.concatenate([[0], np.cumsum(gathered["pre_lengths"])]).astype(np.int64),
                      pre_indices=gathered["pre_sources"], send_pre_counts=send_pre_counts,
                      post_send_index=gathered["post_sources"], send_post_counts=send_post_counts,
                      owned_old_ids=new_to_old[offsets[j]:offsets[j + 1]], **receiving))
    names = [*_PAIR_STATISTICS, *(("cover", "matching") if strategy == "hybrid" else ())]
    _save_columns(pairs_path, names, senders.column)
    totals = _plan_totals(strategy, num_ranks, senders.column, sent_by, received_by)
    senders.remove()
    return totals


def _save_columns(path: Path, names, column: Callable[[str], np.ndarray]) -> None:
    """An ``.npz`` of the named columns, one in memory at a time (``np.savez`` holds all)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name in names:
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, column(name))


def _plan_totals(strategy: str, num_ranks: int, column: Callable[[str], np.ndarray], sent_by: np.ndarray,
                 received_by: np.ndarray) -> dict:
    """``plan.json``'s statistics, summed over the per-pair records."""
    return {
        "strategy": strategy,
        "num_ranks": num_ranks,
        "total_rows_sent": int(sent_by.sum()),
        "max_rows_sent_by_rank": int(sent_by.max()),
        "max_rows_received_by_rank": int(received_by.max()),
        "cut_edges_directed": int(column("cut_edges").sum()),
        "rows_if_pre": int(column("distinct_destinations").sum()),
        "rows_if_post": int(column("distinct_sources").sum()),
    }


def build_plans(graph: Graph, partition: Partition, strategy: str) -> tuple[list[RankPlan], dict]:
    """Every rank's plan in memory, and the statistics (:func:`plan_ranks`)."""
    plans: list[RankPlan] = []
    with tempfile.TemporaryDirectory(prefix="supergcn-plan-") as scratch:
        pairs_path = Path(scratch) / _PAIRS_FILE
        stats = plan_ranks(graph, partition, strategy, scratch, plans.append, pairs_path)
        with np.load(pairs_path) as pairs:
            stats["pairs"] = {name: pairs[name] for name in pairs.files}
    return plans, stats


def _rank_file(directory: Path, rank: int) -> Path:
    return directory / f"rank_{rank:05d}.npz"


_HASH_BYTES = 16


def file_hash(data: bytes) -> str:
    """The content hash recorded for a rank file."""
    return hashlib.blake2b(data, digest_size=_HASH_BYTES).hexdigest()


def _write_rank_file(directory: Path, plan: RankPlan, hashes: np.ndarray) -> None:
    path = _rank_file(directory, plan.rank)
    np.savez(path, **{f.name: getattr(plan, f.name) for f in fields(RankPlan)})
    hashes[plan.rank] = file_digest(path, _HASH_BYTES)


def _write_plan_index(directory: Path, totals: dict, hashes: np.ndarray, graph_hash: str, partition_hash: str,
                      seconds: float) -> dict:
    """``rank_hashes.npy`` and ``plan.json`` (with the hashes of it and of ``pairs.npz``,
    so that it vouches for every file of the plan) beside the rank files; the manifest."""
    np.save(directory / RANK_HASHES_FILE, hashes)
    file_hashes = {name: file_digest(directory / name, _HASH_BYTES) for name in (RANK_HASHES_FILE, _PAIRS_FILE)}
    manifest = {"format": PLAN_FORMAT, "graph_hash": graph_hash, "partition_hash": partition_hash,
                **totals, "seconds": seconds, "peak_memory_mib": peak_memory_mib(), "file_hashes": file_hashes}
    write_json(directory / "plan.json", manifest)
    return manifest


def _empty_hashes(num_ranks: int) -> np.ndarray:
    return np.empty(num_ranks, dtype=f"S{2 * _HASH_BYTES}")


def read_plan_manifest(directory: str | Path, graph_hash: str | None = None,
                       partition_hash: str | None = None) -> dict:
    """plan.json, refusing a plan built from another graph or partition."""
    directory = Path(directory)
    manifest = read_json(directory / "plan.json", "plan")
    if manifest.get("format") != PLAN_FORMAT:
        raise SuperGCNError(f"{directory} is not a plan of this supergcn version (format {manifest.get('format')!r}, "
                            f"expected {PLAN_FORMAT!r})", "rerun `supergcn plan`")
    for what, expected, key in (("graph", graph_hash, "graph_hash"), ("partition", partition_hash, "partition_hash")):
        if expected is not None and manifest[key] != expected:
            raise SuperGCNError(f"plan {directory} was built from a different {what} ({key} {manifest[key]}, "
                                f"expected {expected})", f"rerun `supergcn plan` with this {what}")
    return manifest


def read_plan_pairs(directory: str | Path) -> dict[str, np.ndarray]:
    """A plan's per-pair statistics (:func:`build_plans`), one array entry per pair with cut
    edges, checked against the hash ``plan.json`` records for them."""
    directory = Path(directory)
    check_plan_file(directory, _PAIRS_FILE)
    arrays = load_array(directory, _PAIRS_FILE.removesuffix(".npz"), "plan", suffix=".npz")
    with arrays:
        return {name: arrays[name] for name in arrays.files}


def check_plan_file(directory: str | Path, name: str, manifest: dict | None = None) -> None:
    """Refuse ``rank_hashes.npy`` or ``pairs.npz`` unless it is the file ``plan.json`` was
    written with (one rank checks the hash list, whose size grows with P)."""
    directory = Path(directory)
    manifest = read_plan_manifest(directory) if manifest is None else manifest
    path = directory / name
    if not path.is_file():
        raise SuperGCNError(f"plan {directory} is incomplete: {name} is missing", "rerun `supergcn plan`")
    if manifest["file_hashes"].get(name) != file_digest(path, _HASH_BYTES):
        raise SuperGCNError(f"{path} does not match the hash plan.json records for it (damaged, truncated or from "
                            "another plan)", "delete the plan directory and rerun `supergcn plan`")


def load_rank_plan(directory: str | Path, rank: int) -> RankPlan:
    """Rank ``rank``'s :class:`RankPlan` from a plan directory written by :func:`run_plan`,
    checked against the hash recorded for it. Reads the rank's own file and its entry of
    ``rank_hashes.npy``, nothing that grows with the number of ranks."""
    directory = Path(directory)
    path = _rank_file(directory, rank)
    if not path.is_file():
        raise SuperGCNError(f"plan file {path} is missing", "rerun `supergcn plan`")
    hashes = load_array(directory, RANK_HASHES_FILE.removesuffix(".npy"), "plan", mmap=True)
    data = path.read_bytes()
    if rank >= len(hashes) or hashes[rank].decode() != file_hash(data):
        raise SuperGCNError(f"plan file {path} does not match the hash {RANK_HASHES_FILE} records for it (damaged, "
                            "truncated or from another plan)", "delete the plan directory and rerun `supergcn plan`")
    with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
        missing = [f.name for f in fields(RankPlan) if f.name not in arrays.files]
        if missing:
            raise SuperGCNError(f"plan file {path} lacks {', '.join(missing)}", "rerun `supergcn plan`")
        values = {f.name: arrays[f.name] for f in fields(RankPlan)}
    for scalar in ("rank", "num_ranks", "offset"):
        values[scalar] = int(values[scalar])
    plan = RankPlan(**values)
    problem = f"it is the plan of rank {plan.rank}" if plan.rank != rank else plan.contradiction()
    if problem is not None:
        raise SuperGCNError(f"plan file {path} contradicts itself: {problem}",
                            "delete the plan directory and rerun `supergcn plan`")
    return plan


def strategy_rows(pairs: dict[str, np.ndarray], num_ranks: int, strategy: str) -> dict[str, np.ndarray]:
    """Comm[j][i], the rows rank j sends rank i per exchange, of pre, post and the plan's
    own ``strategy``, from one plan's per-pair statistics (:func:`read_plan_pairs`).

    A plan of any strategy records, for every pair, its cut edges' distinct sources and
    distinct destinations: pre sends one partial row per distinct destination, post one
    raw row per distinct source, so both follow from any plan; hybrid from a hybrid plan.
    """
    matrices = {}
    for name, key in (("pre", "distinct_destinations"), ("post", "distinct_sources"), (strategy, "rows")):
        matrix = np.zeros((num_ranks, num_ranks), dtype=np.int64)
        matrix[pairs["src"], pairs["dst"]] = pairs[key]
        matrices[name] = matrix
    return matrices


def plan_strategy_rows(directory: str | Path) -> tuple[dict, dict[str, np.ndarray]]:
    """A plan directory's manifest and its :func:`strategy_rows`."""
    manifest = read_plan_manifest(directory)
    return manifest, strategy_rows(read_plan_pairs(directory), manifest["num_ranks"], manifest["strategy"])


def strategy_summary(rows_by_strategy: dict[str, np.ndarray]) -> str:
    """A small text table: rows sent in total and by the busiest rank, per strategy."""
    lines = [f"{'strategy':<8} {'rows sent':>12} {'max by a rank':>14}"]
    for name, rows in rows_by_strategy.items():
        lines.append(f"{name:<8} {int(rows.sum()):>12,} {int(rows.sum(axis=1).max(initial=0)):>14,}")
    return "\n".join(lines)


def run_plan(graph: Graph, graph_hash: str, partition: Partition, partition_hash: str, strategy: str,
             out_dir) -> dict:
    """Build every rank's plan (:func:`plan_ranks`), writing each as it is built, into ``out_dir``.

    Args:
        graph, graph_hash: the prepared graph and its content hash.
        partition, partition_hash: its partition and that partition's hash.
        strategy: ``pre``, ``post`` or ``hybrid``.
        out_dir: the plan directory to write (replaced atomically).

    Returns:
        The manifest written as ``plan.json``.
    """
    started = time.perf_counter()
    with atomic_output_dir(out_dir) as staging:
        hashes = _empty_hashes(partition.num_parts)
        scratch = staging / ".scratch"
        scratch.mkdir()
        totals = plan_ranks(graph, partition, strategy, scratch, lambda plan: _write_rank_file(staging, plan, hashes),
                            staging / _PAIRS_FILE)
        scratch.rmdir()
        return _write_plan_index(staging, totals, hashes, graph_hash, partition_hash, time.perf_counter() - started)


def aggregate_in_process(plans: list[RankPlan], features: np.ndarray) -> np.ndarray:
    """Run the whole distributed mean aggregation in one process, in float64.

    ``features`` are indexed by new ids. Each rank pre-aggregates and gathers its send
    buffer (the ``send`` operator); the buffers are routed as Alltoallv would route them;
    each rank adds local
    and remote contributions and divides by the global in-degree. This is the reference
    the MPI trainer is held to, and the check that a plan reproduces ÂX.
    """
    x = np.asarray(features, dtype=np.float64)
    blocks = [x[p.offset:p.offset + p.num_owned] for p in plans]
    matrices = [p.matrices() for p in plans]
    send_chunks = [np.split(ops["send"] @ block, np.cumsum(plan.send_counts)[:-1])
                   for plan, ops, block in zip(plans, matrices, blocks)]
    out = np.empty_like(x)
    for plan, ops, block in zip(plans, matrices, blocks):
        received = np.concatenate([send_chunks[j][plan.rank] for j in range(len(plans))])
        total = ops["local"] @ block + ops["remote"] @ received
        degree = plan.in_degree.astype(np.float64)
        out[plan.offset:plan.offset + plan.num_owned] = np.divide(
            total, degree[:, None], out=np.zeros_like(total), where=degree[:, None] > 0)
    return out
