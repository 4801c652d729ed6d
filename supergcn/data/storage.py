"""Self-describing, atomically written output directories.

Every pipeline step writes a directory of arrays (``.npy``, or ``.npz`` per rank for
plans) plus a JSON manifest. The
directory is assembled under a temporary name beside its destination and renamed into
place only when complete, so an interrupted or failing step never leaves a directory
that a later step could mistake for a finished one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import resource
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Iterator, Mapping

import numpy as np

from supergcn.errors import SuperGCNError


@contextlib.contextmanager
def atomic_output_dir(destination: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty temporary directory that replaces ``destination`` on success.

    On any exception the temporary directory is removed and ``destination`` is left
    exactly as it was.
    """
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{destination.name}.tmp-", dir=destination.parent))
    try:
        yield staging
        if destination.exists():
            retired = Path(tempfile.mkdtemp(prefix=f".{destination.name}.old-", dir=destination.parent))
            os.replace(destination, retired / destination.name)
            try:
                os.replace(staging, destination)
            except BaseException:
                os.replace(retired / destination.name, destination)  # put the previous output back
                shutil.rmtree(retired)
                raise
            shutil.rmtree(retired)
        else:
            os.replace(staging, destination)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def write_json(path: str | os.PathLike, payload: Mapping) -> None:
    """Write ``payload`` as indented JSON through a temporary file and a rename."""
    write_text(path, json.dumps(payload, indent=2) + "\n")


def read_json(path: str | os.PathLike, what: str) -> dict:
    """Read a manifest, turning a missing or corrupt file into a clear error."""
    path = Path(path)
    if not path.is_file():
        raise SuperGCNError(f"{what} manifest {path} not found: run the step that produces it first")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise SuperGCNError(f"{what} manifest {path} is not valid JSON ({exc}): delete it and rerun the step") from exc


def load_array(directory: Path, name: str, what: str, mmap: bool = False) -> np.ndarray:
    """Load ``directory/name.npy`` or explain which step to rerun."""
    path = directory / f"{name}.npy"
    if not path.is_file():
        raise SuperGCNError(f"{what} {directory} is incomplete: {path.name} is missing; rerun the step that wrote it")
    return np.load(path, mmap_mode="r" if mmap else None)


def hash_arrays(arrays: Mapping[str, np.ndarray]) -> str:
    """A content hash over named arrays: names, dtypes, shapes and bytes, in key order."""
    digest = hashlib.blake2b(digest_size=16)
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"{name}|{array.dtype.str}|{array.shape}|".encode())
        digest.update(array.reshape(-1).view(np.uint8).data)
    return digest.hexdigest()


def peak_memory_mib() -> float:
    """Peak resident memory of this process so far, in MiB (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` that is renamed to ``path`` on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write a text file through a temporary file and a rename."""
    with atomic_file(path) as tmp:
        tmp.write_text(text)
