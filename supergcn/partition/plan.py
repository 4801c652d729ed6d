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
sent j->i = |C| = maximum matching size (König), the fewest possible.

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
import time
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from supergcn.data.graph import Graph
from supergcn.data.keys import group_sorted
from supergcn.data.ranges import block_starts, concatenated_ranges
from supergcn.data.storage import atomic_output_dir, load_array, peak_memory_mib, read_json, write_json
from supergcn.errors import SuperGCNError
from supergcn.naming import STRATEGIES
from supergcn.partition.cover import minimum_vertex_cover
from supergcn.partition.metis import Partition

#: Version 3 keeps per-pair statistics and rank-file hashes in arrays beside ``plan.json``
#: and the owned nodes' original ids in each rank file.
PLAN_FORMAT = "supergcn-plan/3"
_PAIRS_FILE = "pairs.npz"
#: Most cut edges matched in one call of scipy's Hopcroft–Karp, which indexes with int32.
MATCHING_MAX_ENTRIES = 2**31 - 1
_HASHES_FILE = "rank_hashes.npy"


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


def _renumbered_edges(graph: Graph, partition: Partition) -> tuple[np.ndarray, np.ndarray]:
    """(dst, src) of every directed edge in new ids, sorted by dst then src, in the graph's
    index dtype (int32 below 2**31 nodes: half the memory of int64 on the largest arrays)."""
    ids = graph.indices.dtype
    old_to_new = partition.old_to_new.astype(ids)
    matrix = sp.csr_matrix((np.ones(graph.num_edges, dtype=np.int8), old_to_new[graph.indices], graph.indptr),
                           shape=(graph.num_nodes, graph.num_nodes))[partition.new_to_old]
    matrix.sort_indices()
    dst = np.repeat(np.arange(graph.num_nodes, dtype=ids), np.diff(matrix.indptr))
    return dst, matrix.indices.astype(ids, copy=False)


def _unique_inverse(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True)`` through one argsort and :func:`group_sorted`."""
    order = np.argsort(keys)
    values, sorted_inverse = group_sorted(keys[order])
    inverse = np.empty_like(sorted_inverse)
    inverse[order] = sorted_inverse
    return values, inverse


def _hybrid_left_is_post(left_keys, left, right_keys, right, num_nodes, num_pairs):
    """Alg. 1 over all pairs: the union of the pairs' bipartite cut graphs is one bipartite
    graph whose minimum cover is the union of the pairs' minimum covers. Left vertices are
    the (pair, source) groups, right ones the (pair, destination) groups; returns whether
    each left vertex is in the cover (its edges are then POST).

    The pairs are matched in batches of whole pairs of at most :data:`MATCHING_MAX_ENTRIES`
    cut edges, since scipy's Hopcroft–Karp indexes its matrix with 32-bit integers;
    ``left`` and ``right`` come ordered by pair, and so do the keys.
    """
    left_pair = left_keys // num_nodes
    right_pair = right_keys // num_nodes
    edge_pair = left_pair[left]
    left_is_post = np.zeros(len(left_keys), dtype=bool)
    right_in_cover = np.zeros(len(right_keys), dtype=bool)
    left_matched = np.zeros(len(left_keys), dtype=bool)
    for pair_lo, pair_hi in _pair_batches(np.bincount(edge_pair, minlength=num_pairs), MATCHING_MAX_ENTRIES):
        e_lo, e_hi = np.searchsorted(edge_pair, [pair_lo, pair_hi])
        l_lo, l_hi = np.searchsorted(left_pair, [pair_lo, pair_hi])
        r_lo, r_hi = np.searchsorted(right_pair, [pair_lo, pair_hi])
        biadjacency = sp.csr_matrix((np.ones(e_hi - e_lo, dtype=np.int8), (left[e_lo:e_hi] - l_lo,
                                                                           right[e_lo:e_hi] - r_lo)),
                                    shape=(l_hi - l_lo, r_hi - r_lo))
        cover = minimum_vertex_cover(biadjacency)
        left_is_post[l_lo:l_hi] = cover.left
        right_in_cover[r_lo:r_hi] = cover.right
        left_matched[l_lo:l_hi] = cover.match_of_left >= 0
    return left_is_post, {
        "cover": np.bincount(left_pair[left_is_post], minlength=num_pairs)
        + np.bincount(right_pair[right_in_cover], minlength=num_pairs),
        "matching": np.bincount(left_pair[left_matched], minlength=num_pairs),
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
    pair_lo = 0
    while pair_lo < len(edges_per_pair):
        before = ends[pair_lo - 1] if pair_lo else 0
        pair_hi = int(np.searchsorted(ends, before + max_entries, side="right"))
        yield pair_lo, pair_hi
        pair_lo = pair_hi


def _split_csr(rows: np.ndarray, cols: np.ndarray, num_rows: int, bounds: np.ndarray):
    """Yield (indptr, cols) of the CSR with the given (row-sorted) entries, cut into the
    row ranges ``bounds[r] .. bounds[r+1]``."""
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=num_rows))]).astype(np.int64)
    for r in range(len(bounds) - 1):
        lo, hi = indptr[bounds[r]], indptr[bounds[r + 1]]
        yield indptr[bounds[r]:bounds[r + 1] + 1] - lo, cols[lo:hi]


def build_plans(graph: Graph, partition: Partition, strategy: str) -> tuple[list[RankPlan], dict]:
    """Every rank's communication plan for ``strategy`` (the module docstring's operators).

    Cut edges are put in (pair, dst, src) order once: the edges come sorted by (dst, src)
    and a destination's rank i grows with its id, so a stable sort by the sender rank j
    alone gives it. Keys pair * n + dst are then already sorted, which is the order of the
    PRE rows; only the (pair, src) groups need a sort of their own.

    Args:
        graph: the prepared graph.
        partition: its partition into P parts.
        strategy: ``pre``, ``post`` or ``hybrid`` (minimum vertex cover per pair of ranks).

    Returns:
        (one :class:`RankPlan` per rank, the statistics recorded in ``plan.json``: the
        rows-sent matrix ``comm_rows[j][i]``, totals, and per pair the cut edges and the
        rows pre, post and this strategy send).
    """
    if strategy not in STRATEGIES:
        raise SuperGCNError(f"unknown strategy {strategy!r}", f"choose one of {', '.join(STRATEGIES)}")
    num_ranks, n = partition.num_parts, graph.num_nodes
    offsets = partition.offsets
    owner = np.repeat(np.arange(num_ranks, dtype=np.int64), partition.sizes)
    dst, src = _renumbered_edges(graph, partition)
    new_to_old = partition.new_to_old.astype(graph.indices.dtype)
    in_degree = np.bincount(dst, minlength=n)
    is_local = owner[dst] == owner[src]
    local_parts = list(_split_csr(dst[is_local], src[is_local], n, offsets))
    cut_src, cut_dst = src[~is_local], dst[~is_local]
    del dst, src, is_local  # the largest arrays; everything below works on the cut edges

    # numpy sorts 16-bit keys stably by radix, several times faster than wider ones.
    sender = owner[cut_src].astype(np.int16 if num_ranks <= 2**15 else np.int64)
    by_pair = np.argsort(sender, kind="stable")
    del sender
    cut_src, cut_dst = cut_src[by_pair], cut_dst[by_pair]
    del by_pair
    pair = owner[cut_src] * num_ranks + owner[cut_dst]  # j * P + i, j = sender; ascending
    num_pairs = num_ranks * num_ranks
    right_keys, right = group_sorted(pair * n + cut_dst)  # (pair, destination) groups
    left_keys, left = _unique_inverse(pair * n + cut_src)  # (pair, source) groups
    cover_stats = {}
    if strategy == "pre":
        left_is_post = np.zeros(len(left_keys), dtype=bool)
    elif strategy == "post":
        left_is_post = np.ones(len(left_keys), dtype=bool)
    else:
        left_is_post, cover_stats = _hybrid_left_is_post(left_keys, left, right_keys, right, n, num_pairs)
    cut_counts = (np.bincount(pair, minlength=num_pairs), np.bincount(left_keys // n, minlength=num_pairs),
                  np.bincount(right_keys // n, minlength=num_pairs))
    del right
    is_post = left_is_post[left]

    # PRE partial rows: one per (pair, destination), entries already sorted by (pair, dst, src).
    pre_src, pre_dst, pre_pair = cut_src[~is_post], cut_dst[~is_post], pair[~is_post]
    pre_keys, pre_row = group_sorted(pre_pair * n + pre_dst)
    pre_row_pair, pre_row_dst = pre_keys // n, pre_keys % n
    # POST raw rows: one per (pair, source), i.e. per left group in the cover.
    post_keys = left_keys[left_is_post]
    post_row_of_edge = (np.cumsum(left_is_post) - 1)[left[is_post]]
    post_dst = cut_dst[is_post]
    post_row_pair, post_row_src = post_keys // n, post_keys % n
    del cut_src, cut_dst, pair, pre_dst, pre_pair, left, is_post

    pre_counts = np.bincount(pre_row_pair, minlength=num_pairs).reshape(num_ranks, num_ranks)
    post_counts = np.bincount(post_row_pair, minlength=num_pairs).reshape(num_ranks, num_ranks)
    comm = pre_counts + post_counts  # comm[j, i]: rows j sends to i
    recv_start = (np.cumsum(comm, axis=0) - comm).reshape(-1)  # start of j's chunk in i's buffer
    first_pre_row = block_starts(pre_counts.reshape(-1))
    first_post_row = block_starts(post_counts.reshape(-1))
    pre_row_pos = recv_start[pre_row_pair] + np.arange(len(pre_keys)) - first_pre_row[pre_row_pair]
    post_row_pos = (recv_start[post_row_pair] + pre_counts.reshape(-1)[post_row_pair]
                    + np.arange(len(post_keys)) - first_post_row[post_row_pair])

    # Receiver side: owned destination <- receive-buffer row, for PRE rows and POST edges.
    # Every (destination, position) is distinct, so one key orders them as a lexsort would.
    remote_dst = np.concatenate([pre_row_dst, post_dst])
    remote_pos = np.concatenate([pre_row_pos, post_row_pos[post_row_of_edge]])
    order = np.argsort(remote_dst * max(1, int(comm.sum())) + remote_pos)
    remote_parts = _split_csr(remote_dst[order], remote_pos[order], n, offsets)
    # Sender side: PRE rows and POST rows are both sorted sender-major.
    pre_row_bounds = np.searchsorted(pre_row_pair // num_ranks, np.arange(num_ranks + 1))
    pre_entry_bounds = np.searchsorted(pre_row, pre_row_bounds)
    pre_indptr_global = np.concatenate([[0], np.cumsum(np.bincount(pre_row, minlength=len(pre_keys)))])
    post_bounds = np.searchsorted(post_row_pair // num_ranks, np.arange(num_ranks + 1))

    plans = []
    for r, ((local_indptr, local_src), (remote_indptr, remote_idx)) in enumerate(zip(local_parts, remote_parts)):
        base = offsets[r]
        rows = slice(pre_row_bounds[r], pre_row_bounds[r + 1])
        entries = slice(pre_entry_bounds[r], pre_entry_bounds[r + 1])
        plans.append(RankPlan(
            rank=r, num_ranks=num_ranks, offset=int(base),
            local_indptr=local_indptr, local_indices=local_src - base,
            pre_indptr=pre_indptr_global[rows.start:rows.stop + 1] - pre_indptr_global[rows.start],
            pre_indices=pre_src[entries] - base,
            send_pre_counts=pre_counts[r].copy(),
            post_send_index=post_row_src[post_bounds[r]:post_bounds[r + 1]] - base,
            send_post_counts=post_counts[r].copy(),
            recv_counts=comm[:, r].copy(),
            remote_indptr=remote_indptr, remote_indices=remote_idx,
            in_degree=in_degree[offsets[r]:offsets[r + 1]],
            owned_old_ids=new_to_old[offsets[r]:offsets[r + 1]],
        ))
    return plans, _plan_stats(strategy, comm, pre_counts, post_counts, cut_counts, num_ranks, cover_stats)


def _plan_stats(strategy, comm, pre_counts, post_counts, cut_counts, num_ranks, cover_stats):
    """The plan's statistics: totals (``plan.json``) and, under ``"pairs"``, one array entry
    per ordered pair (j sends to i) with cut edges (``pairs.npz``); ``cut_counts`` holds per
    pair the cut edges, their distinct sources (the rows post sends) and distinct
    destinations (the rows pre sends)."""
    cut_edges, distinct_src, distinct_dst = cut_counts
    cut = np.flatnonzero(cut_edges)
    src, dst = np.divmod(cut, num_ranks)
    pairs = {"src": src, "dst": dst, "cut_edges": cut_edges[cut], "rows": comm.reshape(-1)[cut],
             "pre_rows": pre_counts.reshape(-1)[cut], "post_rows": post_counts.reshape(-1)[cut],
             "distinct_sources": distinct_src[cut], "distinct_destinations": distinct_dst[cut]}
    if cover_stats:
        pairs["cover"] = cover_stats["cover"][cut]
        pairs["matching"] = cover_stats["matching"][cut]
    return {
        "strategy": strategy,
        "num_ranks": num_ranks,
        "total_rows_sent": int(comm.sum()),
        "max_rows_sent_by_rank": int(comm.sum(axis=1).max()),
        "max_rows_received_by_rank": int(comm.sum(axis=0).max()),
        "cut_edges_directed": int(cut_edges.sum()),
        "rows_if_pre": int(distinct_dst.sum()),
        "rows_if_post": int(distinct_src.sum()),
        "pairs": {name: np.asarray(values, dtype=np.int64) for name, values in pairs.items()},
    }


def _rank_file(directory: Path, rank: int) -> Path:
    return directory / f"rank_{rank:05d}.npz"


_HASH_BYTES = 16


def file_hash(data: bytes) -> str:
    """The content hash recorded for a rank file."""
    return hashlib.blake2b(data, digest_size=_HASH_BYTES).hexdigest()


def save_plans(plans: list[RankPlan], stats: dict, out_dir: str | Path, graph_hash: str, partition_hash: str,
               seconds: float) -> dict:
    """Write the plans (one ``rank_NNNNN.npz`` each, their hashes in ``rank_hashes.npy``),
    the per-pair statistics (``pairs.npz``) and ``plan.json`` into ``out_dir`` atomically;
    return the manifest."""
    totals = {key: value for key, value in stats.items() if key != "pairs"}
    manifest = {"format": PLAN_FORMAT, "graph_hash": graph_hash, "partition_hash": partition_hash,
                **totals, "seconds": seconds, "peak_memory_mib": peak_memory_mib()}
    with atomic_output_dir(out_dir) as staging:
        hashes = np.empty(len(plans), dtype=f"S{2 * _HASH_BYTES}")
        for plan in plans:
            path = _rank_file(staging, plan.rank)
            np.savez(path, **{f.name: getattr(plan, f.name) for f in fields(RankPlan)})
            hashes[plan.rank] = file_hash(path.read_bytes())
        np.save(staging / _HASHES_FILE, hashes)
        np.savez(staging / _PAIRS_FILE, **stats["pairs"])
        write_json(staging / "plan.json", manifest)
    return manifest


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
    """A plan's per-pair statistics (:func:`build_plans`), one array entry per pair with cut edges."""
    arrays = load_array(Path(directory), _PAIRS_FILE.removesuffix(".npz"), "plan", suffix=".npz")
    with arrays:
        return {name: arrays[name] for name in arrays.files}


def load_rank_plan(directory: str | Path, rank: int) -> RankPlan:
    """Rank ``rank``'s :class:`RankPlan` from a plan directory written by :func:`save_plans`,
    checked against the hash recorded for it. Reads the rank's own file and its entry of
    ``rank_hashes.npy``, nothing that grows with the number of ranks."""
    directory = Path(directory)
    path = _rank_file(directory, rank)
    if not path.is_file():
        raise SuperGCNError(f"plan file {path} is missing", "rerun `supergcn plan`")
    hashes = load_array(directory, _HASHES_FILE.removesuffix(".npy"), "plan", mmap=True)
    data = path.read_bytes()
    if rank >= len(hashes) or hashes[rank].decode() != file_hash(data):
        raise SuperGCNError(f"plan file {path} does not match the hash {_HASHES_FILE} records for it (damaged, "
                            "truncated or from another plan)", "delete the plan directory and rerun `supergcn plan`")
    with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
        missing = [f.name for f in fields(RankPlan) if f.name not in arrays.files]
        if missing:
            raise SuperGCNError(f"plan file {path} lacks {', '.join(missing)}", "rerun `supergcn plan`")
        values = {f.name: arrays[f.name] for f in fields(RankPlan)}
    for scalar in ("rank", "num_ranks", "offset"):
        values[scalar] = int(values[scalar])
    return RankPlan(**values)


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
    """Build every rank's plan (:func:`build_plans`) and write them to ``out_dir``.

    Args:
        graph, graph_hash: the prepared graph and its content hash.
        partition, partition_hash: its partition and that partition's hash.
        strategy: ``pre``, ``post`` or ``hybrid``.
        out_dir: the plan directory to write (replaced atomically).

    Returns:
        The manifest written as ``plan.json``.
    """
    started = time.perf_counter()
    plans, stats = build_plans(graph, partition, strategy)
    return save_plans(plans, stats, out_dir, graph_hash, partition_hash, time.perf_counter() - started)


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
