"""Kernel benchmarks: ``supergcn bench kernels`` and ``supergcn bench quantization``.

``bench_kernels`` measures our aggregation kernels against PyG, torch and scipy.

Everything is measured in one process, on the same graph, features and threads:

* ``ours_forward`` — mean aggregation, numba gather over A with the 1/deg row scale;
* ``ours_backward`` — its transpose, a gather over the precomputed A^T;
* ``pyg_scatter_mean`` — PyG's default CPU path for ``SAGEConv``: gather ``x[src]`` then
  ``torch_geometric.utils.scatter(..., reduce="mean")`` over ``edge_index``;
* ``torch_sparse_mm`` — ``torch.sparse.mm`` on a CSR tensor (sum);
* ``scipy_csr`` — ``scipy.sparse.csr_matrix @ x`` (sum);
* ``memcpy_gb_per_s`` — bytes copied per second by a parallel copy of a 1 GiB array with
  the same threads, and ``roofline_seconds`` = nnz x F x itemsize / that bandwidth: the
  time to read every gathered row once from memory with no cache reuse.

Times are medians of ``repeats`` calls after a warm-up call; ``first_call_seconds`` is
the warm-up call of our kernel (compilation, or loading numba's on-disk cache).
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import scipy.sparse as sp
import torch

from supergcn.data.graph import load_graph
from supergcn.distributed.threads import set_threads
from supergcn.kernels.gather import GatherCsr, _gather_spmm
from supergcn.kernels.jit import njit, prange


def _timed(function, repeats: int) -> tuple[float, float]:
    """(first call seconds, median of ``repeats`` further calls)."""
    started = time.perf_counter()
    function()
    first = time.perf_counter() - started
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return first, statistics.median(times)


@njit(parallel=True, cache=True)
def _parallel_copy(source, destination, parts):
    n = len(source)
    step = (n + parts - 1) // parts
    for part in prange(parts):
        start = part * step
        stop = min(n, start + step)
        destination[start:stop] = source[start:stop]


def memcpy_bandwidth(threads: int, nbytes: int = 2**30, repeats: int = 5) -> float:
    source = np.ones(nbytes // 4, dtype=np.float32)
    destination = np.empty_like(source)
    _, seconds = _timed(lambda: _parallel_copy(source, destination, threads), repeats)
    return source.nbytes / seconds / 1e9


def reorder(indptr, indices, num_nodes, method: str):
    if method == "none":
        return indptr, indices, None
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    matrix = sp.csr_matrix((np.ones(len(indices), np.float32), indices, indptr), shape=(num_nodes, num_nodes))
    permutation = reverse_cuthill_mckee(matrix, symmetric_mode=True)
    matrix = matrix[permutation][:, permutation].tocsr()
    matrix.sort_indices()
    return matrix.indptr, matrix.indices, permutation


def bench_kernels(graph_dir, features: int, threads: int, repeats: int = 5, reordering: str = "none",
                  with_pyg: bool = True) -> dict:
    from torch_geometric.utils import scatter

    set_threads(threads)
    graph = load_graph(graph_dir, mmap=True)
    n = graph.num_nodes
    indptr, indices, _ = reorder(np.asarray(graph.indptr), np.asarray(graph.indices), n, reordering)
    x = np.random.default_rng(0).standard_normal((n, features), dtype=np.float32)
    degree = np.diff(indptr).astype(np.float32)
    inv_degree = np.where(degree > 0, 1.0 / np.maximum(degree, 1), 0).astype(np.float32)
    forward = GatherCsr(indptr, indices, n)
    backward = forward.transpose()
    out = np.empty_like(x)

    first_call, ours_forward = _timed(lambda: forward.matmul(x, out=out, row_scale=inv_degree), repeats)
    reference = sp.csr_matrix((np.ones(len(indices), np.float32), indices, indptr), shape=(n, n))
    expected = (reference @ x) * inv_degree[:, None]
    max_error = float(np.abs(out - expected).max())
    _, ours_backward = _timed(lambda: backward.matmul(x, out=out, row_scale=inv_degree), repeats)
    _, scipy_time = _timed(lambda: reference @ x, repeats)
    csr = torch.sparse_csr_tensor(torch.from_numpy(indptr.astype(np.int64)), torch.from_numpy(indices.astype(np.int64)),
                                  torch.ones(len(indices)), size=(n, n), check_invariants=False)
    xt = torch.from_numpy(x)
    _, torch_time = _timed(lambda: torch.sparse.mm(csr, xt), repeats)
    result = {
        "graph": str(graph_dir), "num_nodes": n, "nnz": int(len(indices)), "features": features, "threads": threads,
        "reordering": reordering, "repeats": repeats,
        "seconds": {"ours_forward": ours_forward, "ours_backward": ours_backward, "torch_sparse_mm": torch_time,
                    "scipy_csr": scipy_time},
        "first_call_seconds": first_call,
        "numba_cache": {"hits": int(sum(_gather_spmm.stats.cache_hits.values())),
                        "misses": int(sum(_gather_spmm.stats.cache_misses.values()))},
        "max_abs_error_vs_scipy": max_error,
    }
    if with_pyg:
        targets = torch.from_numpy(np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr)))
        sources = torch.from_numpy(indices.astype(np.int64))
        _, pyg_time = _timed(lambda: scatter(xt[sources], targets, dim=0, dim_size=n, reduce="mean"), repeats)
        result["seconds"]["pyg_scatter_mean"] = pyg_time
    bandwidth = memcpy_bandwidth(threads)
    roofline = len(indices) * features * x.itemsize / (bandwidth * 1e9)
    seconds = result["seconds"]
    result["memcpy_gb_per_s"] = bandwidth
    result["roofline_seconds"] = roofline
    result["ratios"] = {
        "pyg_over_ours": seconds.get("pyg_scatter_mean", float("nan")) / ours_forward,
        "torch_sparse_mm_over_ours": torch_time / ours_forward,
        "scipy_over_ours": scipy_time / ours_forward,
        "ours_over_roofline": ours_forward / roofline,
        "backward_over_forward": ours_backward / ours_forward,
    }
    return result


def _interleaved(functions: dict, repeats: int) -> dict[str, float]:
    """Median seconds of each function, called in turn ``repeats`` times after a warm-up
    round, so that a drift in memory bandwidth during the run reaches all of them alike."""
    times = {name: [] for name in functions}
    for round_ in range(repeats + 1):
        for name, function in functions.items():
            started = time.perf_counter()
            function()
            if round_:
                times[name].append(time.perf_counter() - started)
    return {name: statistics.median(t) for name, t in times.items()}


def bench_quantization(rows: int, features: int, threads: int, bits: int, rounding: str, repeats: int = 5,
                       destinations: int = 8) -> dict:
    """Throughput of quantize+pack and unpack+dequantize in GB/s of float32 rows, against
    memcpy of the same rows in the same run.

    This machine's memory bandwidth drifts by up to 2x between runs and within one, so the
    kernels and the copy (of the same array, with the same threads) are timed in turn,
    round after round, and each figure is a median; the kernels write into outputs
    allocated once, as training does (:class:`supergcn.distributed.aggregation.BufferPool`).
    ``quantize_pack_allocating`` is quantize with a fresh output per call, for comparison.
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
    seconds = _interleaved({"quantize_pack": lambda: quantize(x, counts, bits, rounding, out=packed),
                            "unpack_dequantize": lambda: dequantize(packed, counts, bits, out=out),
                            "quantize_pack_allocating": lambda: quantize(x, counts, bits, rounding),
                            "memcpy": lambda: _parallel_copy(flat_x, flat_copy, threads)}, repeats)
    rates = {name: x.nbytes / t / 1e9 for name, t in seconds.items()}
    bandwidth = rates.pop("memcpy")
    return {"rows": rows, "features": features, "threads": threads, "bits": bits, "rounding": rounding,
            "seconds": seconds, "gb_per_s": rates, "memcpy_gb_per_s": bandwidth,
            "fraction_of_memcpy": {name: rate / bandwidth for name, rate in rates.items()},
            "packed_bytes": int(packed.packed.nbytes), "float32_bytes": int(x.nbytes)}
