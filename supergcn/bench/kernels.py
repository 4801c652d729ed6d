"""Kernel benchmarks: ``supergcn bench kernels`` and ``supergcn bench quantization``.

``bench_kernels`` measures our aggregation kernel on a prepared graph or on a named
synthetic shape (:data:`SHAPES`), in one process, on the same CSR arrays, features and
threads, against:

* the roofline of :mod:`supergcn.bench.roofline` (a pure gather of the same rows plus a
  pure write of the output, measured in the same rounds) and the bound of the cache
  level holding the gathered matrix;
* the authors' kernel (``supergnn_ops.spmm``, :mod:`supergcn.bench.authors`), forward and
  on the transpose, where the user points to a built copy; its output is compared with
  ours;
* PyG's default ``SAGEConv`` CPU path (``x[src]`` then ``torch_geometric.utils.scatter``
  with ``reduce="mean"``), ``torch.sparse.mm`` on a CSR tensor and ``scipy.sparse``,
  timed after the others (they are slower, and PyG's edge-sized message tensor is
  skipped, with the reason, where it would not fit in memory).

The kernel, its transpose, the authors' kernel and the roofline's passes are timed in
turn, round after round (:func:`supergcn.bench.harness.interleaved`), each figure a median, so that this
machine's drifting memory bandwidth reaches them alike. ``first_call_seconds`` is our
kernel's first call (compilation, or loading numba's on-disk cache).
"""

from __future__ import annotations

import functools
import os
import time

import numpy as np
import scipy.sparse as sp
import torch

from supergcn.bench import roofline
from supergcn.bench.harness import cache_sizes, interleaved, timed
from supergcn.data.graph import load_graph
from supergcn.data.keys import unique_sorted
from supergcn.distributed.threads import set_threads
from supergcn.errors import SuperGCNError
from supergcn.kernels.bfloat16 import kernel_array
from supergcn.kernels.gather import GatherCsr, _gather_spmm
from supergcn.kernels.jit import njit, prange
from supergcn.kernels.simd import compiled_for

#: Synthetic CSR shapes (nodes, entries): degrees Zipf(2.2) scaled to the mean, neighbours
#: distinct and uniform at random (:func:`zipf_csr`).
SHAPES = {
    "papers100M-rank-8192": (13_500, 401_000),   # one rank's local graph at P = 8,192 on ogbn-papers100M
    "synthetic-small": (20_000, 244_000),
    "arxiv": (169_343, 2_470_000),               # ogbn-arxiv with self loops, undirected
    "products": (2_449_029, 61_859_140),         # ogbn-products
}
ZIPF_EXPONENT = 2.2
#: The types the gathered rows may have (``--rows``).
ROW_TYPES = ("float32", "bfloat16")


def zipf_csr(num_nodes: int, entries: int, seed: int = 0, exponent: float = ZIPF_EXPONENT):
    """(indptr, indices) of a square CSR: row degrees Zipf(``exponent``) scaled to about
    ``entries`` in all, at least one per row and none above ``num_nodes`` (a row cut there
    hands what it loses to the others), each row's neighbours distinct and uniform at
    random, sorted: a graph's adjacency, which repeats no entry.

    Args:
        num_nodes: rows and columns.
        entries: the entries wanted, about.
        seed: seed of the degrees and neighbours.
        exponent: the Zipf exponent.

    Returns:
        ``(indptr, indices)``, both int64.
    """
    rng = np.random.default_rng(seed)
    degrees = rng.zipf(exponent, num_nodes).astype(np.float64)
    degrees *= min(entries, num_nodes**2) / degrees.sum()
    for _ in range(64):  # each pass cuts the rows past num_nodes and scales the others up to the total
        cut = degrees >= num_nodes
        degrees[cut] = num_nodes
        rest = degrees[~cut].sum()
        if not cut.any() or rest == 0 or degrees.sum() >= min(entries, num_nodes**2) * (1 - 1e-9):
            break
        degrees[~cut] *= (min(entries, num_nodes**2) - num_nodes * cut.sum()) / rest
    degrees = np.clip(np.round(degrees), 1, num_nodes).astype(np.int64)
    indptr = np.concatenate([[0], np.cumsum(degrees)])
    # Rows of at most an eighth of the columns draw with replacement, then draw again what
    # repeated (a round keeps 7/8 of its draws at least), merged into the sorted keys; the
    # few denser rows take a permutation's head.
    dense = degrees * 8 > num_nodes
    rows = np.flatnonzero(~dense)
    keys, missing = np.empty(0, dtype=np.int64), degrees[rows]
    while missing.any():
        drawn = unique_sorted(np.repeat(rows * num_nodes, missing) + rng.integers(0, num_nodes, int(missing.sum())))
        at = np.searchsorted(keys, drawn)
        new = keys[np.minimum(at, len(keys) - 1)] != drawn if len(keys) else np.ones(len(drawn), dtype=bool)
        keys = np.insert(keys, at[new], drawn[new])
        missing = degrees[rows] - np.bincount(keys // num_nodes, minlength=num_nodes)[rows]
    keys = [keys, *(row * num_nodes + rng.permutation(num_nodes)[:degrees[row]] for row in np.flatnonzero(dense))]
    keys = np.sort(np.concatenate(keys))
    return indptr, keys % num_nodes


@functools.lru_cache(maxsize=1)
def _shape_csr(shape: str) -> tuple[np.ndarray, np.ndarray]:
    """A shape's CSR, kept for the next call on the same shape (read-only: shared)."""
    indptr, indices = zipf_csr(*SHAPES[shape])
    indptr.flags.writeable = indices.flags.writeable = False
    return indptr, indices


@njit(parallel=True, cache=True)
def _parallel_copy(source, destination, parts):
    n = len(source)
    step = (n + parts - 1) // parts
    for part in prange(parts):
        start = part * step
        stop = min(n, start + step)
        destination[start:stop] = source[start:stop]


def reorder(indptr, indices, num_nodes, method: str):
    """The square CSR ``indptr``/``indices`` of ``num_nodes`` nodes renumbered by ``method``:
    ``none`` or ``rcm`` (reverse Cuthill-McKee, scipy's), rows sorted.

    Returns:
        ``(indptr, indices, permutation)``; the permutation is None for ``none``.
    """
    if method == "none":
        return indptr, indices, None
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    matrix = sp.csr_matrix((np.ones(len(indices), np.float32), indices, indptr), shape=(num_nodes, num_nodes))
    permutation = reverse_cuthill_mckee(matrix, symmetric_mode=True)
    matrix = matrix[permutation][:, permutation].tocsr()
    matrix.sort_indices()
    return matrix.indptr, matrix.indices, permutation


def load_csr(graph_dir=None, shape: str | None = None) -> tuple[str, np.ndarray, np.ndarray]:
    """(name, indptr, indices) of a prepared graph's adjacency or of a synthetic shape.

    Args:
        graph_dir: a prepared graph directory (memory-mapped), or None.
        shape: a key of :data:`SHAPES`, or None.

    Returns:
        ``(name, indptr, indices)``, the name being the directory or the shape.

    Raises:
        ValueError: both or neither of ``graph_dir`` and ``shape`` are given.
        SuperGCNError: the graph directory cannot be loaded.
    """
    if (graph_dir is None) == (shape is None):
        raise ValueError("pass a prepared graph or a shape, not both")
    if shape is not None:
        return shape, *_shape_csr(shape)
    graph = load_graph(graph_dir, mmap=True)
    return str(graph_dir), np.asarray(graph.indptr), np.asarray(graph.indices)


def roofline_figures(seconds: dict, gathered_bytes: int, output_bytes: int, x_bytes: int, threads: int) -> dict:
    """The roofline and the cache level's bound from the pure passes' medians.

    Args:
        seconds: medians of ``pure_gather``, ``pure_write`` and ``stream_read``.
        gathered_bytes: bytes of the neighbour rows the product reads.
        output_bytes: bytes of the output.
        x_bytes: bytes of the input matrix.
        threads: threads the passes ran on.

    Returns:
        The roofline's seconds, the pure gather's alone (the reads, which no kernel
        overlaps away), the passes' GB/s, the cache level holding the input, the cache
        sizes and that level's bound in seconds.
    """
    stream_rate = x_bytes / seconds["stream_read"]
    write_rate = output_bytes / seconds["pure_write"]
    return {"seconds": seconds["pure_gather"] + seconds["pure_write"], "pure_gather_seconds": seconds["pure_gather"],
            "gather_gb_per_s": gathered_bytes / seconds["pure_gather"] / 1e9,
            "write_gb_per_s": write_rate / 1e9, "stream_read_gb_per_s": stream_rate / 1e9,
            "x_bytes": x_bytes, "x_fits_in": roofline.cache_level(x_bytes, threads),
            "cache_sizes": cache_sizes(),
            "level_bound_seconds": gathered_bytes / stream_rate + output_bytes / write_rate}


def check_rows(rows: str, with_authors: bool) -> None:
    """Refuse a row type :func:`bench_kernels` does not know, and bfloat16 rows beside the
    authors' kernel (which gathers float32 only).

    Args:
        rows: the gathered rows' type asked for (one of :data:`ROW_TYPES`).
        with_authors: whether the authors' kernel is to be timed beside ours.

    Raises:
        SuperGCNError: naming the problem and the fix.
    """
    if rows not in ROW_TYPES:
        raise SuperGCNError(f"unknown row type {rows!r}: choose one of {ROW_TYPES}")
    if rows != "float32" and with_authors:
        raise SuperGCNError("the authors' kernel gathers float32 rows only: drop --authors-ops or use --rows float32")


def bench_kernels(graph_dir=None, features: int = 256, threads: int = 1, repeats: int = 15,
                  reordering: str = "none", with_pyg: bool = True, shape: str | None = None,
                  authors_ops=None, with_references: bool = True, rows: str = "float32") -> dict:
    """Our kernel against its roofline, the authors' kernel (a module from
    :func:`supergcn.bench.authors.load_authors_ops`) and the libraries (module docstring).

    Args:
        graph_dir: a prepared graph directory; or None, with ``shape``.
        features: F, the input's columns.
        threads: threads of every contender.
        repeats: rounds; each figure is a median.
        reordering: ``none`` or ``rcm`` (:func:`reorder`).
        with_pyg: whether to time PyG's scatter.
        shape: a key of :data:`SHAPES`; or None, with ``graph_dir``.
        authors_ops: the authors' built module; None leaves them out.
        with_references: whether to time scipy, torch and PyG at all.
        rows: ``float32`` or ``bfloat16``: the type of the gathered rows (a bf16 run's
            gathers read bfloat16 rows and sum in float32, :func:`~supergcn.kernels.gather.sums_in`);
            the roofline's passes read the same bytes. The libraries and the authors'
            kernel take float32 only, so with ``bfloat16`` none is timed.

    Returns:
        The run's description, ``seconds`` per contender, ``roofline``, ``ratios``, the
        error against scipy, the first call's seconds and numba's cache hits.

    Raises:
        ValueError: both or neither of ``graph_dir`` and ``shape`` are given.
        SuperGCNError: the graph directory cannot be loaded; ``rows`` is unknown, or
            ``bfloat16`` with the authors' kernel.
    """
    check_rows(rows, authors_ops is not None)
    set_threads(threads)
    name, indptr, indices = load_csr(graph_dir, shape)
    n = len(indptr) - 1
    indptr, indices, _ = reorder(indptr, indices, n, reordering)
    values = np.random.default_rng(0).standard_normal((n, features), dtype=np.float32)
    if rows == "bfloat16":  # the bit patterns, as a bf16 rank holds its rows; the sums are float32
        values = torch.from_numpy(values).bfloat16()
        x, values = kernel_array(values), values.float().numpy()
    else:
        x = values
    forward = GatherCsr(indptr, indices, n)
    backward = forward.transpose()
    out, sink = np.empty_like(values), np.empty(threads, np.float32)
    # One row per chunk, each at least a cache line apart, so threads do not share lines.
    scratch = np.empty((len(forward.chunks()) - 1, max(features, 16)), np.float32)
    started = time.perf_counter()
    forward.matmul(x, out=out)
    first_call = time.perf_counter() - started
    contenders = {"ours_forward": lambda: forward.matmul(x, out=out),
                  "ours_backward": lambda: backward.matmul(x, out=out),
                  "pure_gather": lambda: forward.pure_gather(x, scratch),
                  "pure_write": lambda: roofline.pure_write(out, forward.chunks(), np.float32(1)),
                  "stream_read": lambda: roofline.stream_read(x, sink)}
    result = {"graph": name, "num_nodes": n, "nnz": int(len(indices)), "features": features, "rows": rows,
              "threads": threads,
              "reordering": reordering, "repeats": repeats, "compiled_for": compiled_for()}
    if authors_ops is not None:
        contenders.update(_authors_contenders(authors_ops, forward, backward, x, threads, result))
    seconds = interleaved(contenders, repeats)
    forward.matmul(x, out=out)
    reference = sp.csr_matrix((np.ones(len(indices), np.float32), indices, indptr), shape=(n, n))
    result["max_abs_error_vs_scipy"] = float(np.abs(out - reference @ values).max())
    if authors_ops is not None:
        result["authors_max_abs_difference"] = result.pop("_authors_check")(out)
    result["first_call_seconds"] = first_call
    result["numba_cache"] = {"hits": int(sum(_gather_spmm.stats.cache_hits.values())),
                             "misses": int(sum(_gather_spmm.stats.cache_misses.values()))}
    gathered_bytes = len(indices) * features * x.itemsize
    result["roofline"] = roofline_figures({k: seconds.pop(k) for k in ("pure_gather", "pure_write", "stream_read")},
                                          gathered_bytes, out.nbytes, x.nbytes, threads)
    if with_references and rows == "float32":
        seconds.update(_library_seconds(reference, indptr, indices, x, repeats, with_pyg, result))
    result["seconds"] = seconds
    result["ratios"] = _ratios(seconds, result["roofline"])
    return result


def _authors_contenders(module, forward: GatherCsr, backward: GatherCsr, x: np.ndarray, threads: int,
                        result: dict) -> dict:
    """The authors' forward and transpose products as timed contenders; stores in
    ``result["_authors_check"]`` the function comparing their forward output with ours."""
    from supergcn.bench.authors import AuthorsSpmm

    theirs = {direction: AuthorsSpmm(module, matrix.indptr, matrix.indices, threads)
              for direction, matrix in (("forward", forward), ("backward", backward))}
    outputs = {direction: np.zeros_like(x) for direction in theirs}

    def check(ours: np.ndarray) -> float:
        fresh = np.zeros_like(x)
        theirs["forward"](x, fresh)
        return float(np.abs(fresh - ours).max())
    result["_authors_check"] = check
    # Their kernel adds into its output: timed alone, as their layer calls it on a zeroed
    # output it allocates; the additions change no timing.
    return {f"authors_{direction}": (lambda d=direction: theirs[d](x, outputs[d])) for direction in theirs}


def _library_seconds(reference, indptr, indices, x, repeats: int, with_pyg: bool, result: dict) -> dict:
    """Medians of scipy, torch.sparse.mm and (where its message tensor fits) PyG's scatter."""
    from torch_geometric.utils import scatter

    n, features = x.shape
    seconds = {"scipy_csr": timed(lambda: reference @ x, repeats)[1]}
    csr = torch.sparse_csr_tensor(torch.from_numpy(indptr.astype(np.int64)), torch.from_numpy(indices.astype(np.int64)),
                                  torch.ones(len(indices)), size=(n, n), check_invariants=False)
    xt = torch.from_numpy(x)
    seconds["torch_sparse_mm"] = timed(lambda: torch.sparse.mm(csr, xt), repeats)[1]
    messages = len(indices) * features * x.itemsize
    available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if with_pyg and 2 * messages > available:
        result["pyg_skipped"] = (f"its {len(indices):,} x {features} message tensor needs {messages / 2**30:.1f} GiB, "
                                 f"{available / 2**30:.1f} GiB are free")
    elif with_pyg:
        targets = torch.from_numpy(np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr)))
        sources = torch.from_numpy(indices.astype(np.int64))
        seconds["pyg_scatter_mean"] = timed(
            lambda: scatter(xt[sources], targets, dim=0, dim_size=n, reduce="mean"), repeats)[1]
    return seconds


def _ratios(seconds: dict, bound: dict) -> dict:
    ours = seconds["ours_forward"]
    ratios = {"ours_over_roofline": ours / bound["seconds"],
              "ours_over_level_bound": ours / bound["level_bound_seconds"],
              "backward_over_forward": seconds["ours_backward"] / ours}
    for other, key in (("authors_forward", "ours_over_authors"), ("authors_backward", "ours_backward_over_authors")):
        if other in seconds:
            mine = seconds["ours_backward"] if "backward" in other else ours
            ratios[key] = mine / seconds[other]
    for other, key in (("pyg_scatter_mean", "pyg_over_ours"), ("torch_sparse_mm", "torch_sparse_mm_over_ours"),
                       ("scipy_csr", "scipy_over_ours")):
        if other in seconds:
            ratios[key] = seconds[other] / ours
    return ratios


def bench_quantization(rows: int, features: int, threads: int, bits: int, rounding: str, repeats: int = 5,
                       destinations: int = 8) -> dict:
    """Throughput of quantize+pack and unpack+dequantize in GB/s of float32 rows, against
    memcpy of the same rows in the same run.

    This machine's memory bandwidth drifts by up to 2x between runs and within one, so the
    kernels and the copy (of the same array, with the same threads) are timed in turn,
    round after round, and each figure is a median; the kernels write into outputs
    allocated once, as training does (:class:`supergcn.distributed.buffers.BufferPool`).
    ``quantize_pack_allocating`` is quantize with a fresh output per call, for comparison.

    Args:
        rows: rows quantized.
        features: the feature columns, F.
        threads: threads of the kernels and the copy.
        bits: 8, 4 or 2.
        rounding: ``nearest`` or ``stochastic``.
        repeats: rounds; each figure is a median.
        destinations: chunks the rows are split into, as for that many ranks.

    Returns:
        The settings, ``seconds`` and ``gb_per_s`` per kernel, ``memcpy_gb_per_s``, each
        kernel's ``fraction_of_memcpy`` and the packed and float32 bytes.

    Raises:
        ValueError: ``bits`` or ``rounding`` is not one the kernels take.
    """
    from supergcn.kernels.quantization import dequantize, quantize

    set_threads(threads)
    x = np.random.default_rng(0).standard_normal((rows, features), dtype=np.float32)
    counts = np.full(destinations, rows // destinations)
    counts[-1] += rows - counts.sum()
    packed = quantize(x, counts, bits, rounding)
    out = np.empty_like(x)
    copy = np.empty_like(x)
    flat_x, flat_copy = x.reshape(-1), copy.reshape(-1)
    seconds = interleaved({"quantize_pack": lambda: quantize(x, counts, bits, rounding, out=packed),
                            "unpack_dequantize": lambda: dequantize(packed, counts, bits, out=out),
                            "quantize_pack_allocating": lambda: quantize(x, counts, bits, rounding),
                            "memcpy": lambda: _parallel_copy(flat_x, flat_copy, threads)}, repeats)
    rates = {name: x.nbytes / t / 1e9 for name, t in seconds.items()}
    bandwidth = rates.pop("memcpy")
    return {"rows": rows, "features": features, "threads": threads, "bits": bits, "rounding": rounding,
            "seconds": seconds, "gb_per_s": rates, "memcpy_gb_per_s": bandwidth,
            "fraction_of_memcpy": {name: rate / bandwidth for name, rate in rates.items()},
            "packed_bytes": int(packed.packed.nbytes), "float32_bytes": int(x.nbytes)}
