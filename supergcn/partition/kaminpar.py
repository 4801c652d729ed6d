"""KaMinPar partitioning: multi-threaded, a few bytes per adjacency entry, up to k in the thousands.

METIS (:mod:`supergcn.partition.metis`) runs on one thread and keeps every level of its
coarsening at 16 bytes per adjacency entry each (about 110 B per entry on products-shaped
graphs). KaMinPar (Gottesbüren et al., PyPI ``kaminpar``, 64-bit ids) partitions in
parallel from a graph file and, with its ``terapart`` presets, keeps the graph compressed:
11 B per entry for the whole partitioning process was measured on a products-shaped graph
(docs/results.md, "Preparing the paper's graphs"). Its Python binding reads graphs only
from METIS or ParHIP files, so the canonical CSR is streamed into a ParHIP file here, row
block by row block, never copied whole into memory.

ParHIP's binary layout (KaMinPar's ``kaminpar-io/parhip_parser.cc``): three uint64 header
words — a version whose bits, when *clear*, say that the file has edge weights (bit 0),
node weights (bit 1), 64-bit edge offsets (2), 64-bit node ids (3), 64-bit node weights
(4), 64-bit edge weights (5) — then n; then m (directed entries). Then n + 1 edge offsets
given as byte positions in the file (``header + (n+1)·8 + e·id_width``), the m neighbour
ids, and n node weights. Self loops are left out, as for METIS.

KaMinPar runs in a process of its own (:mod:`supergcn.partition.kaminpar_process`): its
binding holds the interpreter lock while it works, which would silence the step's heartbeat.

Constraints: KaMinPar balances one node weight, so the constraints are folded into one as
for METIS (:func:`supergcn.partition.partition.combined_weight`); the partition manifest
reports the balance of each constraint separately.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from supergcn.data.csr import ROW_BLOCK_ENTRIES
from supergcn.data.graph import Graph, adjacency_blocks
from supergcn.errors import SuperGCNError
from supergcn.partition.config import LARGE_K
from supergcn.partition.kaminpar_process import partition_file
from supergcn.partition.partition import Partition, capped_weight, check_num_parts, combined_weight, constraint_weights

#: Most parts, as a fraction of all, that KaMinPar may leave empty to be filled (:func:`fill_empty_parts`).
MAX_EMPTY_FRACTION = 0.01
#: Graphs with this many nodes or more get 64-bit node ids in the file.
WIDE_IDS_FROM = 2**31
_HEADER_WORDS = 3


def parhip_version(node_weights: bool, wide_ids: bool) -> int:
    """The header's version word: no edge weights, 64-bit edge offsets and node weights,
    node ids 64-bit only where ``wide_ids``.

    Args:
        node_weights: whether the file holds node weights.
        wide_ids: whether node ids are 64-bit.

    Returns:
        The version word.
    """
    no_edge_weights, no_node_weights = 1, 0 if node_weights else 2
    narrow_ids = 0 if wide_ids else 8
    return no_edge_weights | no_node_weights | narrow_ids | 32  # bit 5: 32-bit edge weights (none stored)


def write_parhip(graph: Graph, path: str | Path, node_weights: np.ndarray | None = None,
                 block_entries: int = ROW_BLOCK_ENTRIES) -> int:
    """Write ``graph`` without its self loops as a ParHIP file; return the entries written.

    Memory beyond the (memory-mapped) graph: n + 1 offsets and one block of about
    ``block_entries`` adjacency entries at a time.

    Args:
        graph: the prepared graph (memory-mapped or not).
        path: the file to write.
        node_weights: one integer weight per node (written as int64), or None for none.
        block_entries: adjacency entries per block, about.

    Returns:
        The adjacency entries written (the graph's less its self loops).

    Raises:
        SuperGCNError: a neighbour id lies outside the graph's nodes.
    """
    n = graph.num_nodes
    wide_ids = n >= WIDE_IDS_FROM
    id_dtype = np.dtype("<u8" if wide_ids else "<u4")
    loops_before = np.zeros(n + 1, dtype=np.int64)
    for start, stop, rows, indices in adjacency_blocks(graph, block_entries, "kaminpar: ParHIP file, degrees"):
        loops = rows[indices == rows]
        loops_before[start + 1:stop + 1] = np.bincount(loops - start, minlength=stop - start)
    np.cumsum(loops_before, out=loops_before)
    xadj = graph.indptr - loops_before
    del loops_before
    num_entries = int(xadj[-1])
    header = np.array([parhip_version(node_weights is not None, wide_ids), n, num_entries], dtype="<u8")
    first_entry_byte = 8 * (_HEADER_WORDS + n + 1)
    xadj *= id_dtype.itemsize
    xadj += first_entry_byte
    with open(path, "wb") as out:
        out.write(header.tobytes())
        out.write(xadj.astype("<u8", copy=False).tobytes())
        del xadj
        for _, _, rows, indices in adjacency_blocks(graph, block_entries, "kaminpar: ParHIP file, neighbours"):
            out.write(indices[indices != rows].astype(id_dtype).tobytes())
        if node_weights is not None:
            out.write(np.asarray(node_weights, dtype="<i8").tobytes())
    return num_entries


def preset_for(num_parts: int, preset: str, large_k_preset: str) -> str:
    """The KaMinPar preset for ``num_parts``: ``large_k_preset`` beyond :data:`LARGE_K`.

    Args:
        num_parts: the number of parts, P.
        preset: the preset up to :data:`LARGE_K` parts.
        large_k_preset: the preset beyond.

    Returns:
        The preset's name.
    """
    return large_k_preset if num_parts > LARGE_K else preset


def kaminpar_parts(graph: Graph, num_parts: int, node_weights: np.ndarray, seed: int, threads: int, preset: str,
                   scratch_dir: str | Path, scratch_prefix: str = ".kaminpar-") -> tuple[np.ndarray, float]:
    """KaMinPar's part of every node (int32), the graph handed over as a ParHIP file
    written in ``scratch_dir`` (named ``scratch_prefix``...) and removed once read, to a
    process of its own (:mod:`supergcn.partition.kaminpar_process`), so that the step's
    heartbeat shows while KaMinPar runs. ``terapart`` presets read it compressed.

    Args:
        graph: the prepared graph.
        num_parts: the number of parts, P.
        node_weights: one integer weight per node, or None for unit weights.
        seed: KaMinPar's random seed.
        threads: KaMinPar's threads.
        preset: a KaMinPar preset (``kaminpar.context_names()``).
        scratch_dir: where the graph file (and the parts, meanwhile) are written.
        scratch_prefix: the start of their names.

    Returns:
        ``(parts, peak_mib)``: int32 part ids, one per node (parts may be empty), and the
        step's peak resident memory while KaMinPar ran, in MiB (its process's and this
        one's: :func:`~supergcn.partition.kaminpar_process.partition_file`).

    Raises:
        SuperGCNError: KaMinPar has no such preset, a neighbour id lies outside the
            graph's nodes, or KaMinPar's process failed or was killed.
    """
    import kaminpar

    if preset not in kaminpar.context_names():
        raise SuperGCNError(f"KaMinPar has no preset {preset!r}",
                            f"choose one of {', '.join(sorted(kaminpar.context_names()))}")
    files = []
    try:
        for suffix in (".parhip", ".parts.npy"):
            handle, path = tempfile.mkstemp(prefix=scratch_prefix, suffix=suffix, dir=scratch_dir)
            os.close(handle)
            files.append(Path(path))
        graph_file, parts_file = files
        write_parhip(graph, graph_file, node_weights)
        return partition_file(graph_file, parts_file, num_parts, seed, threads, preset,
                              on_loaded=lambda: graph_file.unlink(missing_ok=True))
    finally:
        for path in files:
            path.unlink(missing_ok=True)


def fill_empty_parts(parts: np.ndarray, num_parts: int, node_weights: np.ndarray | None,
                     max_empty_fraction: float = MAX_EMPTY_FRACTION) -> int:
    """Give every part KaMinPar left empty one node, in place; return how many were filled.

    With thousands of parts of a few hundred nodes, and hubs capped at a whole part's
    weight (:func:`supergcn.partition.partition.capped_weight`), KaMinPar can leave a few parts
    empty (5 of 8,192 on ``synthetic-products``, 2 threads), and a rank without nodes
    cannot train. Each empty part takes the lightest node (the last of equals) of the part
    with most nodes at that moment: one node moves per empty part, so the cut and balance
    barely change. More than ``max_empty_fraction`` of the parts empty is refused. (With at
    least as many nodes as parts, the part with most nodes always has one to spare.)

    Args:
        parts: part id of every node, changed in place.
        num_parts: the number of parts, P.
        node_weights: the weights KaMinPar balanced (None: all 1).
        max_empty_fraction: the largest share of the parts that may be empty.

    Returns:
        The parts filled.

    Raises:
        SuperGCNError: more than ``max_empty_fraction`` of the parts are empty.
    """
    sizes = np.bincount(parts, minlength=num_parts)
    empty = np.flatnonzero(sizes == 0)
    if len(empty) > max_empty_fraction * num_parts:
        raise SuperGCNError(f"KaMinPar left {len(empty)} of {num_parts} parts empty on {len(parts)} nodes",
                            "use fewer parts for this graph")
    weights = np.ones(len(parts), dtype=np.int64) if node_weights is None else node_weights
    for part in empty:
        donor = int(sizes.argmax())
        members = np.flatnonzero(parts == donor)
        lightest = members[weights[members] == weights[members].min()][-1]
        parts[lightest] = part
        sizes[donor] -= 1
        sizes[part] += 1
    return len(empty)


def kaminpar_partition(graph: Graph, num_parts: int, constraints, seed: int, threads: int, preset: str,
                       out_dir: Path) -> tuple[Partition, int, float]:
    """KaMinPar's k-way partition with the constraints folded into one weight, as for METIS,
    how many parts it left empty and were given a node, and the step's peak memory while it ran;
    its graph file is written beside ``out_dir`` and removed.

    Args:
        graph: the prepared graph.
        num_parts: the number of parts, P.
        constraints: the constraints to balance, folded into one capped weight
            (:func:`~supergcn.partition.partition.capped_weight`); empty for unit weights.
        seed: KaMinPar's random seed.
        threads: KaMinPar's threads.
        preset: the KaMinPar preset.
        out_dir: the partition directory to be; its parent holds the graph file meanwhile.

    Returns:
        ``(partition, filled, peak_mib)``: the partition, how many empty parts were given a
        node, and the step's peak resident memory while KaMinPar ran (its process's and
        this one's), in MiB.

    Raises:
        SuperGCNError: P is out of range, a constraint is unknown, the preset does not
            exist, KaMinPar's process failed or was killed, or too many parts were left
            empty.
    """
    check_num_parts(graph, num_parts)
    weights = capped_weight(combined_weight(constraint_weights(graph, constraints)), num_parts) if constraints else None
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    # Named as atomic_output_dir's staging directories, so the next attempt after a killed
    # job removes a left-over file (tens of GB at papers100M's size).
    parts, peak_mib = kaminpar_parts(graph, num_parts, weights, seed, threads, preset, out_dir.parent,
                                     f".{out_dir.name}.tmp-kaminpar-")
    filled = fill_empty_parts(parts, num_parts, weights)
    return Partition(parts, num_parts), filled, peak_mib
