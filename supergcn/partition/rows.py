"""The graph's node arrays in rank order, written beside a partition.

Rank r owns the new ids ``offsets[r] .. offsets[r+1]-1``, whose original ids lie scattered
through the graph's arrays: gathering them from the graph reads a whole page for nearly
every row (at P = 1,024 on products a rank faulted 17 MiB of pages for 3.2 MiB of its own
data). The partition step therefore writes every node array (features, labels, masks) in
new-id order, a rank at a time, so that a rank's rows are one contiguous slice of each
file. Each rank's slices are hashed as they are written (``row_hashes.npy``); a training
rank checks its own slices against its entry, and one rank checks that list against the
partition manifest. Disk: one more copy of the node arrays per process count.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

from supergcn.data.digests import file_digest
from supergcn.data.graph import Graph
from supergcn.data.storage import load_array, release_pages
from supergcn.errors import SuperGCNError
from supergcn.progress import progress

#: The node arrays a training rank reads, in the order their slices are hashed.
NODE_ARRAYS = ("features", "labels", "train_mask", "val_mask", "test_mask")
ROW_HASHES_FILE = "row_hashes.npy"
_HASH_BYTES = 16
_ROWS_PER_WRITE = 1 << 18
#: Bytes of a node array a rank copies at a time while it loads its slice.
_BLOCK_BYTES = 1 << 24


def _file(name: str) -> str:
    return f"rows_{name}.npy"


def write_rank_rows(graph: Graph, offsets: np.ndarray, new_to_old: np.ndarray, directory: Path) -> str:
    """Write ``rows_<array>.npy`` for every :data:`NODE_ARRAYS` in new-id order and
    ``row_hashes.npy`` (one hash per rank over its slices); return the hash of that list.
    Memory: one block of rows at a time (the pages of a memory-mapped graph released after each)."""
    num_ranks = len(offsets) - 1
    digests = [hashlib.blake2b(digest_size=_HASH_BYTES) for _ in range(num_ranks)]
    total = sum(getattr(graph, name).nbytes for name in NODE_ARRAYS)
    with progress("partition: node arrays in rank order", total=total, unit="B", scale=True) as bar:
        for name in NODE_ARRAYS:
            source = getattr(graph, name)
            with open(directory / _file(name), "wb") as out:
                np.lib.format.write_array_header_1_0(out, {"descr": np.lib.format.dtype_to_descr(source.dtype),
                                                           "fortran_order": False, "shape": source.shape})
                for rank in range(num_ranks):
                    for start in range(int(offsets[rank]), int(offsets[rank + 1]), _ROWS_PER_WRITE):
                        stop = min(start + _ROWS_PER_WRITE, int(offsets[rank + 1]))
                        block = np.ascontiguousarray(source[new_to_old[start:stop]]).tobytes()
                        digests[rank].update(block)
                        out.write(block)
                        release_pages(source)
                        bar.update(len(block))
    hashes = np.array([digest.hexdigest() for digest in digests], dtype=f"S{2 * _HASH_BYTES}")
    np.save(directory / ROW_HASHES_FILE, hashes)
    return file_digest(directory / ROW_HASHES_FILE, _HASH_BYTES)


def load_rank_rows(directory: str | Path, rank: int, offset: int, count: int, manifest: dict,
                   check_hash_list: bool = False,
                   stored_as: dict[str, tuple[np.dtype, Callable[[np.ndarray, np.ndarray], None]]] | None = None
                   ) -> dict[str, np.ndarray]:
    """Rank ``rank``'s rows ``offset .. offset+count-1`` of every node array, read as one
    contiguous slice each and checked against its entry of ``row_hashes.npy`` (and, with
    ``check_hash_list``, that list against ``manifest``, the partition's).

    Each slice is copied a block of :data:`_BLOCK_BYTES` at a time, its mapped pages dropped
    after each block, so the rank's peak holds its rows once (not the mapped pages, the
    copy and a copy to hash beside each other); ``stored_as`` maps an array's name to the
    type it is stored in and a ``convert(block, into)`` that writes a block, copied once
    into one reused buffer, into its rows of the result (a bf16 run's features: bfloat16
    bits, half the bytes, never a whole float32 copy beside them). The hash is of the rows
    as written.
    """
    directory = Path(directory)
    hashes = load_array(directory, ROW_HASHES_FILE.removesuffix(".npy"), "partition", mmap=True)
    if check_hash_list and file_digest(directory / ROW_HASHES_FILE, _HASH_BYTES) != manifest.get("row_hashes_hash"):
        raise SuperGCNError(f"{directory / ROW_HASHES_FILE} does not match the hash partition.json records for it "
                            "(damaged, truncated or from another partition)",
                            "delete the partition directory and rerun `supergcn partition`")
    digest = hashlib.blake2b(digest_size=_HASH_BYTES)
    rows = {}
    for name in NODE_ARRAYS:
        whole = load_array(directory, _file(name).removesuffix(".npy"), "partition", mmap=True)
        dtype, convert = (stored_as or {}).get(name, (whole.dtype, None))
        block = max(1, _BLOCK_BYTES // max(1, whole[:1].nbytes))
        out = np.empty((count, *whole.shape[1:]), dtype=dtype)
        scratch = None if convert is None else np.empty((min(block, count), *whole.shape[1:]), dtype=whole.dtype)
        for start in range(offset, offset + count, block):
            source = whole[start:min(start + block, offset + count)]
            digest.update(source)  # a row slice of a C-ordered array: contiguous, hashed in place
            rows_of = out[start - offset:start - offset + len(source)]
            if convert is None:
                rows_of[...] = source
            else:
                np.copyto(scratch[:len(source)], source)
                convert(scratch[:len(source)], rows_of)
            release_pages(source)
        rows[name] = out
        del whole
    if rank >= len(hashes) or hashes[rank].decode() != digest.hexdigest():
        raise SuperGCNError(f"the rows of rank {rank} in {directory} do not match the hash {ROW_HASHES_FILE} records "
                            "(damaged, truncated or from another partition)",
                            "delete the partition directory and rerun `supergcn partition`")
    return rows
