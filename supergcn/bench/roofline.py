"""A roofline for the aggregation kernels that binds: what their bytes cost on this machine.

A gather ``out = A x`` must read, for every entry k of A, the row ``x[col[k]]`` (with the
index arrays that name it), and write every row of ``out`` once. Where those rows come
from depends on the graph: a hub's row is read from cache after its first use, and ``x``
of a rank at P = 8,192 fits in the last-level cache. So the bound is measured on the same
data, with the same threads, in the same run as the kernel:

    roofline = T_gather + T_write

* ``T_gather`` — a *pure gather*: the kernel itself, reading the same rows in the same
  order with the same code, but writing every row of a chunk over one row that stays in
  cache (:meth:`supergcn.kernels.gather.GatherCsr.pure_gather`);
* ``T_write`` — a *pure write* of the output's bytes with ordinary stores, as the kernel
  writes them (:func:`pure_write`).

No kernel that produces ``out`` can move those bytes faster than the two passes that
each move only one kind of them, except by overlapping reads with writes, which the
memory system shares. Beside it, the *level bound* says what the gathered bytes would
cost at the streaming read rate of ``x`` itself (:func:`stream_read`, the same bytes read
in address order) plus the output at the write rate: the bound of the cache level
holding ``x`` (:func:`cache_level`, from :func:`supergcn.bench.harness.cache_sizes`) if
the gather reused every line it fetched.
"""

from __future__ import annotations

from supergcn.bench.harness import cache_sizes
from supergcn.kernels.jit import njit, prange
from supergcn.kernels.simd import prefer_wide_vectors


@njit(parallel=True, fastmath=True, nogil=True, cache=True)
def pure_write(out, chunks, value):
    """Store ``value`` into every element of rows ``chunks[c] .. chunks[c+1]`` of ``out``."""
    for chunk in prange(len(chunks) - 1):
        prefer_wide_vectors()
        for r in range(chunks[chunk], chunks[chunk + 1]):
            row = out[r]
            for f in range(out.shape[1]):
                row[f] = value


@njit(parallel=True, fastmath=True, nogil=True, cache=True)
def stream_read(x, sink):
    """Sum the rows of ``x`` in address order, one contiguous share per element of ``sink``."""
    parts = len(sink)
    for part in prange(parts):
        prefer_wide_vectors()
        total = x[0, 0] * 0
        for r in range(part * x.shape[0] // parts, (part + 1) * x.shape[0] // parts):
            row = x[r]
            for f in range(x.shape[1]):
                total += row[f]
        sink[part] = total


def cache_level(nbytes: int, threads: int, sizes: dict[str, int] | None = None) -> str:
    """The smallest level whose capacity (the private L1 and L2 of ``threads`` cores, the
    shared L3) holds ``nbytes``; ``memory`` where none does."""
    sizes = cache_sizes() if sizes is None else sizes
    for level, size in sorted(sizes.items()):
        capacity = size if level == "L3" else size * threads
        if nbytes <= capacity:
            return level
    return "memory"
