"""Content hashes of arrays and files, read a block at a time: what a manifest records so
that a step's outputs can be checked and reused (a graph's, a partition's, a plan's)."""

from __future__ import annotations

import hashlib
import os
from typing import Mapping

import numpy as np

from supergcn.progress import progress

#: Bytes of an array hashed (and shown to an inspector) at a time.
_HASH_BLOCK_BYTES = 1 << 26


def hash_arrays(arrays: Mapping[str, np.ndarray], inspect=None) -> str:
    """A content hash over named ``arrays``: names, dtypes, shapes and bytes, in key order,
    each array read a block of rows at a time (a memory-mapped one is never whole in memory).

    Args:
        arrays: the arrays by name.
        inspect: called as ``inspect(name, first_row, block)`` with every block read, so a
            caller can check the values in the same pass (None: no one looks).

    Returns:
        32 hexadecimal digits of blake2b.
    """
    digest = hashlib.blake2b(digest_size=16)
    for name in sorted(arrays):
        array = np.asarray(arrays[name])
        if array.ndim == 0:
            array = array.reshape(1)  # as np.ascontiguousarray makes it: the hashes of old hold
        digest.update(f"{name}|{array.dtype.str}|{array.shape}|".encode())
        rows = max(1, _HASH_BLOCK_BYTES // max(1, array[0].nbytes)) if len(array) else 1
        for first in range(0, len(array), rows):
            block = np.ascontiguousarray(array[first:first + rows])
            digest.update(block.reshape(-1).view(np.uint8).data)
            if inspect is not None:
                inspect(name, first, block)
    return digest.hexdigest()


#: Bytes read at a time when hashing a file (plan and partition files reach GBs at scale).
_HASH_CHUNK_BYTES = 1 << 24


def feed_file(path: str | os.PathLike, digest, what: str | None = None):
    """Feed the bytes of the file ``path`` to ``digest`` (a :mod:`hashlib` object),
    :data:`_HASH_CHUNK_BYTES` at a time rather than whole.

    Args:
        path: the file.
        digest: what takes the bytes (``update``); a part fed before is continued.
        what: the step shown while it reads (:mod:`supergcn.progress`; None: nothing).

    Returns:
        ``digest``.
    """
    with open(path, "rb") as handle, progress(what, total=os.path.getsize(path), unit="B", scale=True) as bar:
        while chunk := handle.read(_HASH_CHUNK_BYTES):
            digest.update(chunk)
            bar.update(len(chunk))
    return digest


def bytes_digest(data: bytes, digest_size: int = 16) -> str:
    """blake2b (of ``digest_size`` bytes) of ``data``: what :func:`file_digest` gives for a
    file of these bytes.

    Args:
        data: the bytes.
        digest_size: bytes of the digest.

    Returns:
        The digest in hexadecimal, twice ``digest_size`` digits.
    """
    return hashlib.blake2b(data, digest_size=digest_size).hexdigest()


def file_digest(path: str | os.PathLike, digest_size: int = 16) -> str:
    """blake2b (of ``digest_size`` bytes) of the bytes of the file ``path`` (:func:`feed_file`).

    Returns:
        The digest in hexadecimal, twice ``digest_size`` digits.
    """
    return feed_file(path, hashlib.blake2b(digest_size=digest_size)).hexdigest()
