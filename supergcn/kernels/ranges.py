"""Index arithmetic over buffers made of consecutive blocks (one block per peer, per part).

A buffer of blocks of ``counts[k]`` rows starts block k at ``block_starts(counts)[k]``;
rows ``starts[k] .. starts[k] + sizes[k] - 1`` of every block, gathered in block order,
are ``concatenated_ranges(starts, sizes)``; entries grouped by row (a CSR) start row r at
``csr_pointers(rows, num_rows)[r]``; ``total`` things cut into ``parts`` ranges as even as
integers allow start range i at ``even_bounds(total, parts)[i]``. All are vectorised: no
Python loop over blocks.
"""

from __future__ import annotations

import numpy as np


def block_starts(counts) -> np.ndarray:
    """The first row of each block: the exclusive prefix sum of ``counts`` (int64)."""
    counts = np.asarray(counts, dtype=np.int64)
    return np.cumsum(counts) - counts


def concatenated_ranges(starts, sizes) -> np.ndarray:
    """``concatenate([arange(s, s + n) for s, n in zip(starts, sizes)])``, vectorised."""
    starts = np.asarray(starts, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    within = np.arange(int(sizes.sum()), dtype=np.int64) - np.repeat(block_starts(sizes), sizes)
    return np.repeat(starts, sizes) + within


def csr_pointers(rows, num_rows: int) -> np.ndarray:
    """A CSR's row pointers (int64, ``num_rows + 1``): entries of row r, once sorted by row,
    are ``pointers[r] .. pointers[r + 1] - 1``, given each entry's row."""
    return np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=num_rows))]).astype(np.int64)


def even_bounds(total: int, parts: int) -> np.ndarray:
    """``total`` things cut into ``parts`` contiguous ranges of sizes differing by at most
    one: range i is ``bounds[i] .. bounds[i+1] - 1``, ``bounds[i] = ⌊total·i/parts⌋`` (MixGCN's
    split of the feature columns over ranks, and of the RCM order into row blocks).

    Args:
        total: the things (columns, rows).
        parts: the ranges.

    Returns:
        ``parts + 1`` bounds (int64), from 0 to ``total``.
    """
    return total * np.arange(parts + 1, dtype=np.int64) // parts
