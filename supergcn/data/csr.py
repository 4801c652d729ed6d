"""CSR arrays built and read a block of entries at a time, so that no pass over a graph
holds more than a few arrays as long as :data:`ROW_BLOCK_ENTRIES`: the symmetric CSR of an
edge list (:func:`symmetric_csr`) and the row blocks of a CSR (:func:`row_blocks`)."""

from __future__ import annotations

import numpy as np

from supergcn.data.keys import check_pair_keys_fit, first_of_runs
from supergcn.errors import SuperGCNError
from supergcn.kernels.jit import njit
from supergcn.progress import progress, running

#: Adjacency entries a streaming pass holds at once (a few arrays of them, 8 B each).
ROW_BLOCK_ENTRIES = 1 << 22


def row_blocks(indptr: np.ndarray, block_entries: int = ROW_BLOCK_ENTRIES):
    """Yield ``(start, stop)`` row ranges covering every row of the CSR pointers ``indptr``,
    each holding about ``block_entries`` entries (a single longer row makes a block of its own).

    Yields:
        ``(start, stop)``: rows ``start .. stop - 1``, in order.
    """
    num_rows = len(indptr) - 1
    start = 0
    while start < num_rows:
        stop = int(np.searchsorted(indptr, indptr[start] + block_entries, side="right")) - 1
        stop = min(num_rows, max(stop, start + 1))
        yield start, stop
        start = stop




def symmetric_csr(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Undirected, de-duplicated CSR of the edge list ``src`` -> ``dst`` over ``num_nodes``
    nodes, which may hold duplicates, one-way edges and self loops.

    Each edge becomes one key min(u, v) * n + max(u, v), sorted in place and de-duplicated;
    the rows are then filled from the keys (:func:`_fill_symmetric_rows`). Beyond the
    caller's arrays this holds the keys (8 B per edge, twice while de-duplicating) and the
    output: about 12 B per adjacency entry, where a scipy COO-to-CSR conversion of both
    directions took 30 (50 past 2**31 entries, with int64 copies of rows and columns).

    Returns:
        ``(indptr int64, indices)`` with sorted rows, indices int32 below 2**31 nodes.

    Raises:
        SuperGCNError: ``src`` and ``dst`` differ in length, an id lies outside the nodes, or
            the nodes are too many for its keys (:func:`~supergcn.data.keys.check_pair_keys_fit`).
    """
    check_pair_keys_fit(num_nodes)
    src = np.asarray(src)
    dst = np.asarray(dst)
    if len(src) != len(dst):
        raise SuperGCNError("edge list has different numbers of sources and destinations",
                            "the dataset's files are damaged: restore them")
    if len(src) and (min(src.min(), dst.min()) < 0 or max(src.max(), dst.max()) >= num_nodes):
        raise SuperGCNError(f"edge list refers to nodes outside 0..{num_nodes - 1}, the nodes with features",
                            "the dataset's files disagree (one is truncated?): restore them")
    keys = np.empty(len(src), dtype=np.int64)
    with progress("prepare: edge keys", total=len(src), unit="edge", scale=True) as bar:
        for start in range(0, len(src), ROW_BLOCK_ENTRIES):
            stop = min(start + ROW_BLOCK_ENTRIES, len(src))
            a, b = src[start:stop].astype(np.int64), dst[start:stop].astype(np.int64)
            np.multiply(np.minimum(a, b), num_nodes, out=keys[start:stop])
            keys[start:stop] += np.maximum(a, b)
            bar.update(stop - start)
    with running("prepare: sorting the edge keys into the symmetric CSR"):
        keys.sort()
        keys = keys[first_of_runs(keys)]
        index_dtype = np.int32 if num_nodes < 2**31 else np.int64
        degree = np.zeros(num_nodes + 1, dtype=np.int64)
        _count_symmetric_degrees(keys, num_nodes, degree)
        indptr = np.cumsum(degree, out=degree)  # degree[v + 1] counted row v: the running sum is indptr
        indices = np.empty(int(indptr[-1]), dtype=index_dtype)
        _fill_symmetric_rows(keys, num_nodes, indptr, indices)
    return indptr, indices


@njit(cache=True)
def _count_symmetric_degrees(keys, num_nodes, degree):
    """``degree[v + 1]`` = neighbours of v (a loop counted once) for sorted unique keys."""
    for key in keys:
        low = key // num_nodes
        high = key - low * num_nodes
        degree[low + 1] += 1
        if high != low:
            degree[high + 1] += 1


@njit(cache=True)
def _fill_symmetric_rows(keys, num_nodes, indptr, indices):
    """Rows of the symmetric CSR of sorted unique keys low * n + high (low <= high): row v
    holds its smaller neighbours, then v itself (a loop), then its larger neighbours. Keys
    run in (low, high) order, so each pass writes every row's share in ascending order and
    the rows come out sorted without a sort."""
    cursor = indptr[:-1].copy()
    for key in keys:  # smaller neighbours: row `high` gets `low`, lows ascending
        low = key // num_nodes
        high = key - low * num_nodes
        if low < high:
            indices[cursor[high]] = low
            cursor[high] += 1
    for key in keys:  # loops
        low = key // num_nodes
        if key - low * num_nodes == low:
            indices[cursor[low]] = low
            cursor[low] += 1
    for key in keys:  # larger neighbours: row `low` gets `high`, highs ascending
        low = key // num_nodes
        high = key - low * num_nodes
        if low < high:
            indices[cursor[low]] = high
            cursor[low] += 1
