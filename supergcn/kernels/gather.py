"""Numba aggregation kernels (SuperGCN §4, "General and Efficient Aggregation Operators").

Every aggregation is a sparse-dense product in CSR *gather* form,

    out[r, :] = row_scale[r] * (prev[r, :] + sum_{k in row r} w[k] * x[col[k], :])

(prev = out's current content when accumulating, else 0), summed in the order of the
row's entries, each weight's product rounded before its addition, so every result is the
same to the last bit whatever the threads, pieces, register block or CPU: the kernels
carry no fast-math flag (LLVM would reassociate the entries' additions or fuse the
multiplies into them, each CPU target its own way; ``tests/kernels/test_targets.py``).
The transpose is applied as another gather over a precomputed CSR of A^T, so neither
direction needs atomics. ``index_add`` (dst[idx[k]] += src[k]) becomes
the same gather once ``idx`` is sorted and clustered: a pointer array over the stable
``argsort(idx)`` is exactly a CSR whose columns point into ``src`` — no rows are moved.

Micro-kernel (the paper's register-blocked 1 × N kernels). A row's features are cut
into *segments* (:func:`segments`): blocks of ``BLOCK`` columns (eight vector registers:
128 float32 with AVX-512), then one each of ``BLOCK``/2, /4 and /8 columns as the
remainder's bits ask, then a tail narrower than one vector. For each segment the
accumulators live in registers (:func:`~supergcn.kernels.simd.stack_buffer`) while the
row's neighbours stream through, with the same segment of the neighbour
``PREFETCH_DISTANCE`` entries ahead prefetched; the output is read (when accumulating)
and written once per segment, not once per neighbour. Segment widths are compile-time
constants (one specialisation each), so the loops unroll into whole-vector instructions.

Parallel schedule: the rows are cut into chunks of equal *work* (nnz + 1 per row, the +1
for writing the row) by prefix sums, not equal row counts, so a few hub rows do not
leave one thread with most of the work. Rows run one after another inside a chunk, all
their segments before the next row, so the second segment of a neighbour finds the
lines the hardware fetched beside the first. When there are too few chunks to occupy
every thread (a matrix of a few rows), the segments are split into column groups as a
second parallel dimension.
"""

from __future__ import annotations

import numpy as np

from supergcn.kernels.jit import njit, numba, prange, read_only
from supergcn.kernels.simd import (
    ACCUMULATOR_VECTORS,
    block_accumulate,
    block_fill,
    block_store,
    prefer_wide_vectors,
    prefetch,
    stack_buffer,
    vector_lanes,
)

#: float32 lanes of one vector register on this host.
LANES = vector_lanes()
#: Columns of the widest segment: the accumulators of a 1 x BLOCK micro-kernel.
BLOCK = ACCUMULATOR_VECTORS * LANES
#: The widths a segment can have: 1 to 8 vectors (compile-time constants).
_W1, _W2, _W3, _W4, _W5, _W6, _W7, _W8 = (vectors * LANES for vectors in range(1, ACCUMULATOR_VECTORS + 1))
#: Entries ahead of the one being summed whose row is prefetched (8 measured best among
#: 4, 8, 12 and 16 on arxiv- and rank-sized graphs).
PREFETCH_DISTANCE = 8
#: Bytes of a cache line, the stride of the prefetches.
_LINE_BYTES = 64


def sums_in(dtype: np.dtype) -> np.dtype:
    """The dtype a product of ``dtype`` rows is summed and written in: float32 for
    bfloat16 bit patterns (uint16, as numpy holds bfloat16), the rows' own otherwise.

    Args:
        dtype: the input rows' dtype.

    Returns:
        The output's dtype.
    """
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype == np.uint16 else dtype


def segments(num_features: int) -> np.ndarray:
    """(start, width, lanes used of the last vector) of each segment of a row of
    ``num_features`` columns, in order: full blocks of ``BLOCK`` columns, then one segment
    of as many vectors as the remainder needs, its last vector masked to the lanes used.

    Args:
        num_features: F, the row's columns.

    Returns:
        An int64 (segments x 3) array.
    """
    rows = [(start, BLOCK, LANES) for start in range(0, num_features - num_features % BLOCK, BLOCK)]
    remainder = num_features % BLOCK
    if remainder:
        vectors = -(-remainder // LANES)
        rows.append((num_features - remainder, vectors * LANES, remainder - (vectors - 1) * LANES))
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


def balanced_chunks(indptr: np.ndarray, num_chunks: int) -> np.ndarray:
    """Row boundaries of ``num_chunks`` chunks with equal work (nnz + 1 per row).

    Args:
        indptr: CSR row pointers.
        num_chunks: the chunks wanted.

    Returns:
        Sorted int64 boundaries from 0 to the rows (fewer chunks where rows are few).
    """
    num_rows = len(indptr) - 1
    work = indptr[1:] + np.arange(1, num_rows + 1)  # cumulative nnz + rows
    targets = work[-1] * np.arange(1, num_chunks) / num_chunks if num_rows else np.empty(0)
    inner = np.searchsorted(work, targets, side="left") + 1
    return np.unique(np.concatenate([[0], np.minimum(inner, num_rows), [num_rows]])).astype(np.int64)


@njit(nogil=True, cache=True, inline="always")
def _prefetch_ahead(x, indices, k, start, width):
    """Prefetch columns ``start .. start + width`` of the row ``PREFETCH_DISTANCE`` entries
    after entry ``k`` (the last entry's, near the end)."""
    ahead = indices[min(k + PREFETCH_DISTANCE, len(indices) - 1)]
    for offset in range(0, width, _LINE_BYTES // x.itemsize):
        prefetch(x, ahead, start + offset)


@njit(nogil=True, cache=True, inline="always")
def _segment(indptr, indices, weights, x, out, row, out_row, start, width, masked, count, accumulate, scale):
    """Columns ``start .. start + width`` of ``row`` into ``out[out_row]``, the last vector
    (of ``LANES`` columns) reading and writing only its first ``count`` lanes when
    ``masked``. ``width`` and ``masked`` are compile-time constants (module docstring)."""
    prefer_wide_vectors()
    block = stack_buffer(width, out)  # the accumulators: float32 for bfloat16 rows
    block_fill(block, width, LANES, masked, out, out_row, start, count, 1 if accumulate else 0)
    if len(weights) == 0:  # an integer weight: no multiplication (an FMA's latency is twice an add's)
        for k in range(indptr[row], indptr[row + 1]):
            _prefetch_ahead(x, indices, k, start, width)
            block_accumulate(block, width, LANES, masked, x, indices[k], start, count, 1)
    else:
        for k in range(indptr[row], indptr[row + 1]):
            _prefetch_ahead(x, indices, k, start, width)
            block_accumulate(block, width, LANES, masked, x, indices[k], start, count, weights[k])
    block_store(block, width, LANES, masked, out, out_row, start, count, scale)


@njit(nogil=True, cache=True, inline="always")
def _dispatch(indptr, indices, weights, x, out, row, out_row, start, width, count, accumulate, scale):
    """:func:`_segment` for a run-time ``width``: a whole block unmasked, the remainder's
    segment of 1 to 8 vectors masked (whatever its last vector's lanes; one specialisation
    per width, so nine in all)."""
    if width == BLOCK and count == LANES:
        _segment(indptr, indices, weights, x, out, row, out_row, start, BLOCK, False, count, accumulate, scale)
    elif width == _W1:
        _segment(indptr, indices, weights, x, out, row, out_row, start, _W1, True, count, accumulate, scale)
    elif width == _W2:
        _segment(indptr, indices, weights, x, out, row, out_row, start, _W2, True, count, accumulate, scale)
    elif width == _W3:
        _segment(indptr, indices, weights, x, out, row, out_row, start, _W3, True, count, accumulate, scale)
    elif width == _W4:
        _segment(indptr, indices, weights, x, out, row, out_row, start, _W4, True, count, accumulate, scale)
    elif width == _W5:
        _segment(indptr, indices, weights, x, out, row, out_row, start, _W5, True, count, accumulate, scale)
    elif width == _W6:
        _segment(indptr, indices, weights, x, out, row, out_row, start, _W6, True, count, accumulate, scale)
    elif width == _W7:
        _segment(indptr, indices, weights, x, out, row, out_row, start, _W7, True, count, accumulate, scale)
    else:
        _segment(indptr, indices, weights, x, out, row, out_row, start, _W8, True, count, accumulate, scale)


@njit(parallel=True, nogil=True, cache=True)
def _gather_spmm(indptr, indices, weights, row_scale, x, out, chunks, segments, groups, accumulate, discard):
    """The product over rows ``chunks[0] .. chunks[-1]``; with ``discard`` every row of a
    chunk is written to the chunk's row of ``out`` instead of its own (the roofline's pure
    gather: the same reads, no output traffic)."""
    num_chunks = len(chunks) - 1
    unit = np.ones(1, out.dtype)[0]
    for job in prange((len(groups) - 1) * num_chunks):
        group = job // num_chunks
        chunk = job % num_chunks
        for r in range(chunks[chunk], chunks[chunk + 1]):
            scale = row_scale[r] if len(row_scale) else unit
            target = chunk if discard else r
            for s in range(groups[group], groups[group + 1]):
                _dispatch(indptr, indices, weights, x, out, r, target, segments[s, 0], segments[s, 1], segments[s, 2],
                          accumulate, scale)


def column_groups(num_segments: int, num_chunks: int, threads: int) -> np.ndarray:
    """Boundaries of the groups of segments run as separate parallel jobs: one group,
    unless the chunks alone leave threads idle (then as many as fill them).

    Args:
        num_segments: segments of a row.
        num_chunks: row chunks of the call.
        threads: numba's threads.

    Returns:
        int64 boundaries into the segments, from 0 to ``num_segments``.
    """
    wanted = max(1, min(num_segments, -(-2 * threads // max(num_chunks, 1))))
    return np.unique(np.linspace(0, num_segments, wanted + 1).astype(np.int64))


def check_csr(indptr: np.ndarray, indices: np.ndarray, num_cols: int) -> None:
    """Raise ValueError unless ``indptr`` starts at 0, never decreases and ends at
    ``len(indices)``, and every column index lies in ``[0, num_cols)``: the kernels index
    without bounds checks, so a bad index would read other memory.

    Args:
        indptr: CSR row pointers.
        indices: CSR column indices.
        num_cols: the matrix's columns.

    Raises:
        ValueError: naming what is malformed.
    """
    if len(indptr) == 0 or indptr[0] != 0 or indptr[-1] != len(indices) or np.any(np.diff(indptr) < 0):
        raise ValueError(f"malformed CSR row pointers (start {indptr[:1]}, end {indptr[-1:]}, "
                         f"{len(indices)} entries)")
    if len(indices) and (indices.min() < 0 or indices.max() >= num_cols):
        raise ValueError(f"CSR column indices span [{indices.min()}, {indices.max()}], outside the "
                         f"{num_cols} columns")


class GatherCsr:
    """A CSR matrix prepared for repeated ``out = diag(s) A x`` products with the numba kernel.

    Args:
        indptr: CSR row pointers (rows + 1).
        indices: column indices.
        num_cols: the matrix's columns.
        weights: one weight per entry; None for a 0/1 matrix.
        chunks_per_thread: row chunks per thread and piece (:meth:`chunks`).

    Raises:
        ValueError: the CSR is malformed (:func:`check_csr`), or the weights are not one per
            entry.
    """

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, num_cols: int, weights: np.ndarray | None = None,
                 chunks_per_thread: int = 8) -> None:
        # Read-only whatever the caller had (a memory-mapped graph or arrays in memory), as
        # every input of the kernel is: one compilation per dtype (jit.read_only).
        self.indptr = read_only(np.ascontiguousarray(indptr, dtype=np.int64))
        self.indices = read_only(np.ascontiguousarray(indices, dtype=np.int64))
        self.weights = read_only(np.empty(0, np.float32) if weights is None else np.ascontiguousarray(weights))
        self.shape = (len(self.indptr) - 1, int(num_cols))
        check_csr(self.indptr, self.indices, self.shape[1])
        if weights is not None and len(self.weights) != len(self.indices):
            raise ValueError(f"{len(self.weights)} weights for {len(self.indices)} entries")
        self.chunks_per_thread = chunks_per_thread
        self._chunks: dict[tuple[int, int], np.ndarray] = {}  # (threads, pieces) -> boundaries
        self._schedules: dict[tuple[int, int, int], list] = {}  # (threads, pieces, features) -> calls

    def chunks(self, pieces: int = 1) -> np.ndarray:
        """Row boundaries of ``chunks_per_thread`` chunks per thread and piece.

        Args:
            pieces: the parallel calls the rows are split into.

        Returns:
            int64 row boundaries (cached per thread count and ``pieces``).
        """
        key = (numba.get_num_threads(), pieces)
        if key not in self._chunks:
            self._chunks[key] = read_only(balanced_chunks(self.indptr, key[0] * self.chunks_per_thread * pieces))
        return self._chunks[key]

    def matmul(self, x: np.ndarray, out: np.ndarray | None = None, accumulate: bool = False,
               row_scale: np.ndarray | None = None, pieces: int = 1, between=None) -> np.ndarray:
        """``out = diag(row_scale) (out + A x)`` when accumulating, else ``diag(row_scale) A x``.

        With ``pieces`` > 1 the rows are done in that many parallel calls of equal work, and
        ``between()`` runs after each one (the exchange polls MPI there, so that a transfer
        in flight progresses while this product runs).

        Args:
            x: the dense input, one row per column of A: float32, float64, or bfloat16 bit
                patterns (uint16, :func:`sums_in`), summed in float32.
            out: the output (rows x F) of :func:`sums_in` ``x``'s dtype, or None for a new
                one (then nothing is accumulated).
            accumulate: whether to add to ``out``'s content.
            row_scale: one factor per output row; None for none.
            pieces: parallel calls the rows are done in, at least 1.
            between: called after each call; None for nothing.

        Returns:
            ``out``.

        Raises:
            ValueError: ``x``'s rows are not A's columns, ``out`` is not a writable C-contiguous
                rows x F array of that dtype, or ``pieces`` is below 1.
        """
        if x.shape[0] != self.shape[1]:
            raise ValueError(f"x has {x.shape[0]} rows, the matrix {self.shape[1]} columns")
        if pieces < 1:
            raise ValueError(f"pieces must be at least 1, got {pieces}")
        if out is None:
            out = np.empty((self.shape[0], x.shape[1]), dtype=sums_in(x.dtype))
            accumulate = False
        if out.dtype != sums_in(x.dtype):
            raise ValueError(f"a {x.dtype} input is summed into {sums_in(x.dtype)}, not {out.dtype}")
        # The kernel writes whole rows with no bounds check: out must be exactly rows x F, C order.
        if out.shape != (self.shape[0], x.shape[1]) or not (out.flags.c_contiguous and out.flags.writeable):
            raise ValueError(f"out must be a writable C-contiguous {self.shape[0]} x {x.shape[1]} array, not "
                             f"{list(out.shape)} ({'C' if out.flags.c_contiguous else 'not C'}-contiguous)")
        if self.shape[0] == 0 or x.shape[1] == 0:
            return out
        weights, scale, x = self._inputs(x, out.dtype, row_scale)
        for chunks, row_segments, groups in self.schedule(x.shape[1], pieces):
            _gather_spmm(self.indptr, self.indices, weights, scale, x, out, chunks, row_segments, groups, accumulate,
                         False)
            if between is not None:
                between()
        return out

    def schedule(self, num_features: int, pieces: int = 1) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The parallel calls of a product with ``num_features`` columns done in ``pieces``:
        each call's row boundaries, the row's :func:`segments` and the :func:`column_groups`
        (worked out once per thread count, pieces and width: a product of a few rows is
        over in microseconds).

        Args:
            num_features: the product's columns.
            pieces: the parallel calls.

        Returns:
            One ``(chunk boundaries, segments, column groups)`` per call.
        """
        threads = numba.get_num_threads()
        key = (threads, pieces, num_features)
        if key not in self._schedules:
            chunks = self.chunks(pieces)
            row_segments = read_only(segments(num_features))
            bounds = np.unique(np.linspace(0, len(chunks) - 1, pieces + 1).astype(np.int64))
            self._schedules[key] = [(chunks[first:last + 1], row_segments,
                                     read_only(column_groups(len(row_segments), last - first, threads)))
                                    for first, last in zip(bounds[:-1], bounds[1:])]
        return self._schedules[key]

    def pure_gather(self, x: np.ndarray, scratch: np.ndarray) -> None:
        """Read every row :meth:`matmul` reads, in its order and the same way, but write each
        chunk's rows over the first F columns of one row of ``scratch`` (in cache): the
        product's reads without its output (:mod:`supergcn.bench.roofline`). The compiled
        kernel is :meth:`matmul`'s: ``scratch`` is C-contiguous like its output, and may be
        wider than F (rows a cache line apart, so that threads do not share lines).

        Args:
            x: the dense input, as :meth:`matmul` takes it (F columns).
            scratch: C-contiguous, one row per chunk and at least F columns, of
                :func:`sums_in` ``x``'s dtype; written over.

        Raises:
            ValueError: ``scratch`` is not C-contiguous, not of that dtype, or lacks a row
                per chunk or F columns.
        """
        [(chunks, row_segments, groups)] = self.schedule(x.shape[1])
        if (scratch.ndim != 2 or scratch.shape[0] != len(chunks) - 1 or scratch.shape[1] < x.shape[1]
                or not scratch.flags.c_contiguous or scratch.dtype != sums_in(x.dtype)):
            raise ValueError(f"scratch must be a C-contiguous {sums_in(x.dtype)} array of {len(chunks) - 1} rows "
                             f"(one per chunk) and at least {x.shape[1]} columns, not {scratch.dtype} {scratch.shape}")
        weights, scale, x = self._inputs(x, scratch.dtype)
        _gather_spmm(self.indptr, self.indices, weights, scale, x, scratch, chunks, row_segments, groups, False, True)

    def _inputs(self, x: np.ndarray, sums: np.dtype, row_scale: np.ndarray | None = None) -> tuple:
        """The kernel's weights and row scale in the sums' dtype (an empty scale for none) and
        ``x`` contiguous, all read-only: one compilation per dtype (:func:`~supergcn.kernels.jit.read_only`)."""
        scale = np.empty(0, sums) if row_scale is None else np.ascontiguousarray(row_scale, dtype=sums)
        return (read_only(self.weights.astype(sums, copy=False)), read_only(scale),
                read_only(np.ascontiguousarray(x)))

    def transpose(self) -> "GatherCsr":
        """The CSR of A^T, built once (a counting sort of the column indices).

        Returns:
            A new :class:`GatherCsr` of A^T, with the same weights and chunks per thread.
        """
        order = np.argsort(self.indices, kind="stable")
        counts = np.bincount(self.indices, minlength=self.shape[1])
        indptr = np.concatenate([[0], np.cumsum(counts)])
        rows = np.repeat(np.arange(self.shape[0], dtype=np.int64), np.diff(self.indptr))
        weights = self.weights[order] if len(self.weights) else None
        return GatherCsr(indptr, rows[order], self.shape[0], weights, self.chunks_per_thread)


def index_add_plan(index: np.ndarray, num_rows: int) -> GatherCsr:
    """``dst[index[k]] += src[k]`` as a gather: sort ``index``, cluster ``src`` rows per
    destination with a pointer array (no data is moved).

    Args:
        index: the destination row of every ``src`` row.
        num_rows: rows of ``dst``.

    Returns:
        The gather (``num_rows`` x ``len(index)``).

    Raises:
        ValueError: an index outside ``0 .. num_rows - 1``.
    """
    index = np.asarray(index, dtype=np.int64)
    if len(index) and (index.min() < 0 or index.max() >= num_rows):
        raise ValueError(f"index holds rows outside 0..{num_rows - 1}")
    order = np.argsort(index, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(index, minlength=num_rows))])
    return GatherCsr(indptr, order, len(index))


def index_add(dst: np.ndarray, index: np.ndarray, src: np.ndarray, plan: GatherCsr | None = None) -> np.ndarray:
    """In-place ``dst[index[k]] += src[k]`` (pass a cached ``plan`` to reuse the sort).

    Args:
        dst: the rows added to, in place.
        index: the destination row of every ``src`` row.
        src: the rows to add.
        plan: :func:`index_add_plan` of ``index``; None builds it.

    Returns:
        ``dst``.
    """
    plan = index_add_plan(index, dst.shape[0]) if plan is None else plan
    return plan.matmul(src, out=dst, accumulate=True)
