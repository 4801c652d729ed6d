"""The canonical on-disk graph: an undirected, de-duplicated CSR plus node data.

A prepared graph directory holds ``indptr.npy`` (int64, n+1), ``indices.npy`` (int32 or
int64 neighbour ids, sorted within each row), ``features.npy`` (float32, n x F),
``labels.npy`` (int64, -1 where a node has no label), boolean ``train_mask.npy``,
``val_mask.npy``, ``test_mask.npy`` and a ``meta.json`` manifest.

The adjacency is symmetric: row ``v`` lists the neighbours ``u`` of ``v``, which are both
its in- and out-neighbours. A self loop is kept once. The mean aggregation used by
GraphSAGE is therefore::

    (Â X)[v] = (1 / deg(v)) * sum_{u in N(v)} X[u],   deg(v) = |N(v)|,

and (Â X)[v] = 0 for an isolated node.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from supergcn.data.csr import ROW_BLOCK_ENTRIES, row_blocks, symmetric_csr
from supergcn.data.digests import hash_arrays
from supergcn.data.storage import (
    atomic_output_dir,
    load_array,
    peak_memory_mib,
    read_json,
    release_pages,
    write_json,
)
from supergcn.errors import SuperGCNError
from supergcn.naming import DROP_SELF_LOOPS, SELF_LOOPS
from supergcn.progress import progress, tracked

GRAPH_FORMAT = "supergcn-graph/1"
#: The manifest of a prepared graph directory.
GRAPH_MANIFEST = "meta.json"
_ARRAYS = ("indptr", "indices", "features", "labels", "train_mask", "val_mask", "test_mask")
_MASKS = ("train_mask", "val_mask", "test_mask")


@dataclass
class Graph:
    """A prepared graph held in memory (arrays may be memory-mapped, read-only): its ``name``,
    the arrays of the module docstring (``indptr``, ``indices``, ``features``, ``labels``,
    ``train_mask``, ``val_mask``, ``test_mask``) and the ``provenance`` its manifest keeps."""

    name: str
    indptr: np.ndarray
    indices: np.ndarray
    features: np.ndarray
    labels: np.ndarray
    train_mask: np.ndarray
    val_mask: np.ndarray
    test_mask: np.ndarray
    provenance: dict = field(default_factory=dict)

    @property
    def num_nodes(self) -> int:
        """Nodes, n."""
        return len(self.indptr) - 1

    @property
    def num_edges(self) -> int:
        """Directed CSR entries: each undirected edge twice, each self loop once."""
        return int(self.indptr[-1])

    @property
    def num_classes(self) -> int:
        """Classes: one more than the largest label (0 without nodes)."""
        return int(self.labels.max()) + 1 if len(self.labels) else 0

    @property
    def in_degree(self) -> np.ndarray:
        """Entries of each row (n): each node's neighbours, a self loop once."""
        return np.diff(self.indptr)

    @property
    def num_self_loops(self) -> int:
        """Entries v -> v, counted a block of rows at a time (no adjacency-long temporaries)."""
        loops = 0
        for _, _, rows, indices in adjacency_blocks(self, what="counting self loops"):
            loops += int(np.count_nonzero(indices == rows))
        return loops

    @property
    def num_undirected_edges(self) -> int:
        """Undirected edges, a self loop counting once (it is stored once)."""
        loops = self.num_self_loops
        return (self.num_edges - loops) // 2 + loops

    def adjacency(self) -> sp.csr_matrix:
        """The 0/1 adjacency as a scipy CSR matrix (row = destination, column = source).

        Returns:
            An n x n ``scipy.sparse.csr_matrix`` of float32 ones over the graph's arrays.
        """
        data = np.ones(self.num_edges, dtype=np.float32)
        return sp.csr_matrix((data, self.indices, self.indptr), shape=(self.num_nodes, self.num_nodes))

    def content_hash(self, inspect=None) -> str:
        """The hash of the seven arrays (:func:`~supergcn.data.digests.hash_arrays`) that
        names the graph downstream; ``inspect`` sees every block read (as there).

        Returns:
            The hexadecimal digest.
        """
        return hash_arrays({name: getattr(self, name) for name in _ARRAYS}, inspect)

    def validate(self) -> None:
        """Check the invariants every consumer relies on; raise with the broken one.

        Raises:
            SuperGCNError: naming every broken invariant.
        """
        n = self.num_nodes
        problems = []
        if self.indptr[0] != 0 or np.any(np.diff(self.indptr) < 0):
            problems.append("indptr must start at 0 and never decrease")
        if len(self.indices) != self.num_edges:
            problems.append("indices length differs from indptr[-1]")
        if len(self.indices) and (self.indices.min() < 0 or self.indices.max() >= n):
            problems.append("neighbour ids out of range")
        if self.features.ndim != 2 or self.features.shape[0] != n or self.features.dtype != np.float32:
            problems.append("features must be float32 with one row per node")
        if self.labels.shape != (n,):
            problems.append("labels must have one entry per node")
        elif np.any(self.labels < -1):
            row, count = int(np.argmax(self.labels < -1)), int(np.count_nonzero(self.labels < -1))
            labels = "label lies" if count == 1 else "labels lie"
            problems.append(f"{count:,} {labels} outside the classes (the first, {self.labels[row]}, at node {row}; "
                            "-1 marks a node without a label)")
        for mask in ("train_mask", "val_mask", "test_mask"):
            array = getattr(self, mask)
            if array.shape != (n,) or array.dtype != np.bool_:
                problems.append(f"{mask} must be boolean with one entry per node")
            elif self.labels.shape == (n,) and np.any(array & (self.labels < 0)):
                problems.append(f"{mask} selects unlabelled nodes")
        masks = [getattr(self, mask) for mask in _MASKS]
        if all(mask.shape == (n,) for mask in masks) and np.any(masks[0].astype(np.int8) + masks[1] + masks[2] > 1):
            problems.append("the train, validation and test masks overlap")
        if problems:
            raise SuperGCNError(f"graph {self.name!r} is malformed: " + "; ".join(problems),
                                "rerun `supergcn prepare` (or fix the loader of this dataset)")


def adjacency_blocks(graph: "Graph", block_entries: int = ROW_BLOCK_ENTRIES, what: str | None = None):
    """Yield ``(start, stop, rows, indices)`` for the :func:`row_blocks` of ``graph`` (of
    ``block_entries``): the row id and neighbour id (int64) of every entry of rows ``start .. stop - 1``;
    a pass named ``what`` shows how far it is (:mod:`supergcn.progress`).

    After each block the graph's memory-mapped pages are released (:func:`release_pages`),
    so a pass over a mapped graph keeps one block resident, not the whole adjacency.

    Yields:
        ``(start, stop, rows, indices)`` per block, in row order.

    Raises:
        SuperGCNError: a block lists a neighbour id outside the graph
            (:func:`check_neighbours_in_range`).
    """
    with progress(what, total=graph.num_edges, unit="entry", scale=True) as bar:
        for start, stop in row_blocks(graph.indptr, block_entries):
            lo, hi = int(graph.indptr[start]), int(graph.indptr[stop])
            rows = np.repeat(np.arange(start, stop, dtype=np.int64), np.diff(graph.indptr[start:stop + 1]))
            indices = np.asarray(graph.indices[lo:hi], dtype=np.int64)
            check_neighbours_in_range(graph, indices, f"rows {start}..{stop - 1}")
            yield start, stop, rows, indices
            release_pages(graph.indptr, graph.indices)
            bar.update(hi - lo)


def check_neighbours_in_range(graph: "Graph", neighbours: np.ndarray, where: str) -> None:
    """Refuse ``neighbours`` (ids just read from the indices of ``graph`` at ``where``) if one
    lies outside the graph's nodes: code that indexes with them would crash or wrap around.

    Raises:
        SuperGCNError: naming where the ids were read, with the fix.
    """
    if len(neighbours) and (neighbours.min() < 0 or neighbours.max() >= graph.num_nodes):
        raise SuperGCNError(f"graph {graph.name!r} lists neighbour ids outside 0..{graph.num_nodes - 1} "
                            f"(in {where} of indices.npy)",
                            "the file is damaged: delete the graph directory and rerun `supergcn prepare`")


def check_neighbour_ids(graph: "Graph") -> None:
    """Refuse ``graph`` if it lists a neighbour outside its nodes: one pass of
    :func:`adjacency_blocks`, before the adjacency goes to METIS, which would index with
    it unchecked."""
    for _ in adjacency_blocks(graph, what="checking the neighbour ids"):
        pass


def build_graph(name: str, src, dst, features, labels, train_mask, val_mask, test_mask,
                provenance: dict | None = None) -> Graph:
    """Canonicalise raw arrays into a validated :class:`Graph`: the edges ``src`` -> ``dst``
    (:func:`symmetric_csr`) among the nodes of ``features`` (a row each), with the ``name``,
    ``labels``, ``train_mask``, ``val_mask``, ``test_mask`` and ``provenance`` it keeps.

    Returns:
        The graph, its features float32 and labels int64.
    """
    features = np.ascontiguousarray(features, dtype=np.float32)
    indptr, indices = symmetric_csr(src, dst, features.shape[0])
    graph = Graph(
        name=name, indptr=indptr, indices=indices, features=features,
        labels=np.asarray(labels, dtype=np.int64).reshape(-1),
        train_mask=np.asarray(train_mask, dtype=bool), val_mask=np.asarray(val_mask, dtype=bool),
        test_mask=np.asarray(test_mask, dtype=bool), provenance=dict(provenance or {}),
    )
    graph.validate()
    return graph


def random_split(num_nodes: int, fractions: tuple[float, float, float], seed: int,
                 labelled: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seeded train/val/test masks over the ``labelled`` nodes (all when None) of
    ``num_nodes``, in the proportions ``fractions``, from the permutation of ``seed``.

    Returns:
        Three disjoint boolean masks of ``num_nodes`` entries: train, validation and test.
    """
    candidates = np.arange(num_nodes) if labelled is None else np.flatnonzero(labelled)
    order = np.random.default_rng(seed).permutation(candidates)
    n_train = int(round(fractions[0] * len(order)))
    n_val = int(round(fractions[1] * len(order)))
    n_test = min(int(round(fractions[2] * len(order))), len(order) - n_train - n_val)
    masks = []
    for part in (order[:n_train], order[n_train:n_train + n_val], order[n_train + n_val:n_train + n_val + n_test]):
        mask = np.zeros(num_nodes, dtype=bool)
        mask[part] = True
        masks.append(mask)
    return masks[0], masks[1], masks[2]


def with_self_loop_policy(graph: Graph, policy: str) -> Graph:
    """``graph`` with its self loops kept (once, as preparation leaves them) or dropped (as
    upstream SuperGCN's preprocessing does); its provenance records the policy and how
    many loops were dropped, so the manifest says which graph this is.

    Returns:
        A new graph sharing the node arrays of ``graph``.

    Raises:
        ValueError: ``policy`` is not one of :data:`supergcn.naming.SELF_LOOPS`.
    """
    if policy not in SELF_LOOPS:
        raise ValueError(f"unknown self-loop policy {policy!r}: choose one of {SELF_LOOPS}")
    provenance = {**graph.provenance, "self_loop_policy": policy, "self_loops_dropped": 0}
    if policy != DROP_SELF_LOOPS:
        return replace(graph, provenance=provenance)
    rows = np.repeat(np.arange(graph.num_nodes), graph.in_degree)
    kept = graph.indices != rows
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[kept], minlength=graph.num_nodes))]).astype(np.int64)
    provenance["self_loops_dropped"] = int((~kept).sum())
    return replace(graph, indptr=indptr, indices=graph.indices[kept], provenance=provenance)


class _NonFiniteFeatures:
    """Counts, as the arrays are hashed, the feature values that are NaN or infinite, and
    where the first is."""

    def __init__(self) -> None:
        self.count, self.first = 0, None

    def __call__(self, name: str, first_row: int, block: np.ndarray) -> None:
        if name == "features":
            bad = ~np.isfinite(block)
            found = int(np.count_nonzero(bad))
            if found and self.first is None:
                row, column = np.argwhere(bad)[0]
                self.first = (first_row + int(row), int(column))
            self.count += found


def save_graph(graph: Graph, out_dir: str | Path, seconds: float | None = None,
               allow_nonfinite_features: bool = False) -> dict:
    """Write ``graph`` atomically to ``out_dir``, recording the ``seconds`` preparing it took.

    The pass that hashes the arrays also counts feature values that are NaN or infinite;
    unless ``allow_nonfinite_features``, any refuses the graph before a byte is written: a
    graph that cannot train would otherwise be partitioned and planned first (hours at the
    paper's scale) and stop training at its first epoch, its loss NaN.

    Returns:
        The manifest written as ``meta.json`` (``nonfinite_features``: how many were kept).

    Raises:
        SuperGCNError: the graph is malformed (labels outside the classes among it), holds
            non-finite features not allowed, ``out_dir`` cannot be written, or the disk fills.
    """
    graph.validate()
    started = time.perf_counter()
    nonfinite = _NonFiniteFeatures()
    total = sum(getattr(graph, name).nbytes for name in _ARRAYS)
    with progress(f"prepare {graph.name}: hashing and checking", total=total, unit="B", scale=True) as bar:
        def inspect(name: str, first_row: int, block: np.ndarray) -> None:
            nonfinite(name, first_row, block)
            bar.update(block.nbytes)

        content_hash = graph.content_hash(inspect)
    if nonfinite.count and not allow_nonfinite_features:
        row, column = nonfinite.first
        values = "value" if nonfinite.count == 1 else "values"
        # A graph of your own names the file they came from (supergcn.data.datasets.own_arrays).
        source = graph.provenance.get("files", {}).get("features", {}).get("path")
        read = f", read from {source}" if source else ""
        raise SuperGCNError(f"graph {graph.name!r} has {nonfinite.count:,} NaN or infinite feature {values} "
                            f"(the first at node {row:,}, feature {column:,}{read})",
                            "repair the source files or the loader; or keep them with --allow-nonfinite-features "
                            "(training then stops at its first epoch, its loss NaN, unless no loss reaches them)")
    meta = {
        "format": GRAPH_FORMAT,
        "name": graph.name,
        "num_nodes": graph.num_nodes,
        "num_edges_directed": graph.num_edges,
        "num_edges_undirected": graph.num_undirected_edges,
        "self_loops": graph.num_self_loops,
        "isolated_nodes": int(np.count_nonzero(graph.in_degree == 0)),
        "feature_dim": int(graph.features.shape[1]),
        "num_classes": graph.num_classes,
        "split": {m: int(getattr(graph, f"{m}_mask").sum()) for m in ("train", "val", "test")},
        "provenance": graph.provenance,
        "hash": content_hash,
        "nonfinite_features": nonfinite.count,
        "seconds": {"prepare": seconds, "hash": time.perf_counter() - started},
        "peak_memory_mib": peak_memory_mib(),
    }
    with atomic_output_dir(out_dir, GRAPH_MANIFEST) as staging:
        for name in tracked(_ARRAYS, f"prepare {graph.name}: writing arrays", unit="array"):
            np.save(staging / f"{name}.npy", getattr(graph, name))
        write_json(staging / "meta.json", meta)
    return meta


def load_graph(directory: str | Path, mmap: bool = False) -> Graph:
    """Load a prepared graph directory written by :func:`save_graph`, refusing one whose
    arrays parse but contradict its manifest or each other (:func:`check_against_manifest`).

    Returns:
        The graph, its arrays memory-mapped (read-only) with ``mmap``.

    Raises:
        SuperGCNError: a file of ``directory`` is missing, damaged, of another format or contradicts the manifest.
    """
    directory = Path(directory)
    meta = read_graph_meta(directory)
    arrays = {name: load_array(directory, name, "graph", mmap=mmap) for name in _ARRAYS}
    graph = Graph(name=meta["name"], provenance=meta.get("provenance", {}), **arrays)
    check_against_manifest(graph, meta, directory)
    return graph


def check_against_manifest(graph: Graph, meta: dict, directory: Path) -> None:
    """Refuse, before any work, a ``graph`` (of ``directory``) whose files parse but disagree: array
    shapes and dtypes against ``meta`` (its ``meta.json``) and each other; labels within the manifest's
    classes; masks that select unlabelled nodes, overlap, or count other than the manifest's split.

    The node arrays are read a block of rows at a time; nothing adjacency-long is read
    here (every pass over the neighbour ids checks them: :func:`adjacency_blocks`).

    Raises:
        SuperGCNError: naming every disagreement, with the fix.
    """
    n, problems = meta["num_nodes"], []
    expected = {"indptr": ((n + 1,), np.int64), "indices": ((meta["num_edges_directed"],), None),
                "features": ((n, meta["feature_dim"]), np.float32), "labels": ((n,), np.int64),
                **{mask: ((n,), np.bool_) for mask in _MASKS}}
    for name, (shape, dtype) in expected.items():
        array = getattr(graph, name)
        # Neighbour ids are int32 or int64 (int32 below 2^31 nodes, :mod:`supergcn.data.csr`).
        allowed = (np.dtype(np.int32), np.dtype(np.int64)) if dtype is None else (np.dtype(dtype),)
        if array.shape != shape or array.dtype not in allowed:
            problems.append(f"{name}.npy is {array.dtype}{list(array.shape)}, the manifest says "
                            f"{' or '.join(map(str, allowed))}{list(shape)}")
    if not problems and (graph.indptr[0] != 0 or graph.indptr[-1] != len(graph.indices)):
        problems.append("indptr.npy does not run from 0 to the number of entries in indices.npy")
    if not problems:
        problems = _node_array_problems(graph, meta)
    if problems:
        raise SuperGCNError(f"graph {directory} contradicts its manifest or itself: " + "; ".join(problems),
                            "delete the directory and rerun `supergcn prepare`")


def _node_array_problems(graph: Graph, meta: dict) -> list[str]:
    """Labels out of the manifest's classes, masks that overlap, select unlabelled nodes or
    count other than the manifest's split — read :data:`ROW_BLOCK_ENTRIES` rows at a time."""
    num_classes = meta["num_classes"]
    out_of_range, overlapping, unlabelled = 0, 0, 0
    counts = dict.fromkeys(_MASKS, 0)
    for start in range(0, meta["num_nodes"], ROW_BLOCK_ENTRIES):
        rows = slice(start, start + ROW_BLOCK_ENTRIES)
        labels = np.asarray(graph.labels[rows])
        masks = [np.asarray(getattr(graph, mask)[rows]) for mask in _MASKS]
        out_of_range += int(np.count_nonzero(labels >= num_classes))
        selected = masks[0].astype(np.int8) + masks[1] + masks[2]
        overlapping += int(np.count_nonzero(selected > 1))
        unlabelled += int(np.count_nonzero((selected > 0) & (labels < 0)))
        for mask, values in zip(_MASKS, masks):
            counts[mask] += int(np.count_nonzero(values))
        release_pages(graph.labels, *(getattr(graph, mask) for mask in _MASKS))
    problems = []
    if out_of_range:
        problems.append(f"{out_of_range} labels in labels.npy are not below the manifest's {num_classes} classes")
    if overlapping:
        problems.append(f"{overlapping} nodes are in more than one of the train, validation and test masks")
    if unlabelled:
        problems.append(f"the masks select {unlabelled} unlabelled nodes")
    split = {f"{name}_mask": count for name, count in meta["split"].items()}
    if counts != split:
        problems.append(f"the masks select {counts}, the manifest's split says {split}")
    return problems


def read_graph_meta(directory: str | Path) -> dict:
    """A prepared graph's manifest, refusing a ``directory`` of another format.

    Returns:
        The parsed ``meta.json``.

    Raises:
        SuperGCNError: the manifest is missing or not JSON, or its format is not :data:`GRAPH_FORMAT`.
    """
    directory = Path(directory)
    meta = read_json(directory / "meta.json", "graph")
    if meta.get("format") != GRAPH_FORMAT:
        raise SuperGCNError(f"{directory} holds format {meta.get('format')!r}, expected {GRAPH_FORMAT!r}",
                            "rerun `supergcn prepare`")
    return meta
