"""Arrays written once and reused: features drawn from a seed, or derived from a source
file (MAG240M's float16 rows widened to float32), written a block of rows at a time and
memory-mapped, so that none is ever whole in memory."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from supergcn.data.storage import atomic_file, file_stamp, release_pages, write_json
from supergcn.progress import progress


def _source_identity(source: Path) -> dict:
    """What a file derived from ``source`` records of it: its name and
    :func:`~supergcn.data.storage.file_stamp`."""
    return {"source": source.name, "stamp": list(file_stamp(source))}


def _made_from_current(path: Path, record: Path, source: Path) -> bool:
    """Whether the array at ``path`` was made from ``source`` as it is now: its ``record``
    says so, or, written before copies kept one, it is newer than the source (make's rule)."""
    if record.is_file():
        try:
            return json.loads(record.read_text()) == _source_identity(source)
        except (OSError, ValueError):
            return False
    return path.stat().st_mtime_ns >= source.stat().st_mtime_ns


def array_written_once(path: str | os.PathLike, shape: tuple[int, int], dtype, fill_rows,
                       block_rows: int, what: str | None = None, made_from: str | os.PathLike | None = None
                       ) -> np.ndarray:
    """A ``.npy`` array at ``path``, memory-mapped: the one there if its shape and dtype are
    these (and it was made from ``made_from`` as that file is now), else written through
    :func:`atomic_file` a block of rows at a time, each by ``fill_rows(start, rows)`` into
    the mapped ``rows`` from row ``start`` on, the written pages released as it goes, so
    that it is never whole in memory.

    A copy of a source file records the source's inode, size and modification time beside
    it (``<path>.source.json``): a source replaced or rewritten since is copied again, the
    stale copy removed first (it holds nothing valid, and the disk may not hold two).

    Args:
        path: the ``.npy`` file.
        shape: its (rows, columns).
        dtype: its dtype.
        fill_rows: ``fill_rows(start, rows)`` writes the block of rows from ``start`` into ``rows`` in place.
        block_rows: rows per block.
        what: the step it is, to show how far it is (:mod:`supergcn.progress`).
        made_from: the file the rows are derived from, or None (drawn from a seed).

    Returns:
        The array, memory-mapped read-only.

    Raises:
        SuperGCNError: ``path`` cannot be written, or the disk filled.
    """
    path, dtype = Path(path), np.dtype(dtype)
    record = path.with_name(path.name + ".source.json")
    if path.is_file():
        existing = np.load(path, mmap_mode="r", allow_pickle=False)
        if existing.shape == tuple(shape) and existing.dtype == dtype and (
                made_from is None or _made_from_current(path, record, Path(made_from))):
            if made_from is not None and not record.is_file():
                write_json(record, _source_identity(Path(made_from)))
            return existing
        del existing
        path.unlink()
        record.unlink(missing_ok=True)
    with atomic_file(path) as tmp:
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=dtype, shape=tuple(shape))
        with progress(what, total=shape[0], unit="row", scale=True) as bar:
            for start in range(0, shape[0], block_rows):
                fill_rows(start, out[start:start + block_rows])
                out.flush()
                release_pages(out)
                bar.update(min(block_rows, shape[0] - start))
        del out
    if made_from is not None:
        write_json(record, _source_identity(Path(made_from)))
    return np.load(path, mmap_mode="r", allow_pickle=False)
