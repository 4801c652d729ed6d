"""Self-describing, atomically written output directories.

Every pipeline step writes a directory of arrays (``.npy``, or ``.npz`` per rank for
plans) plus a JSON manifest. The
directory is assembled under a temporary name beside its destination and renamed into
place only when complete, so an interrupted or failing step never leaves a directory
that a later step could mistake for a finished one.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import json
import mmap
import os
import re
import resource
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Iterator, Mapping

import numpy as np

from supergcn.errors import SuperGCNError, first_line


def check_replaceable(path: str | os.PathLike, manifest: str) -> None:
    """Refuse, before any work, an output directory a step would wrongly replace: one that
    holds files but not the step's ``manifest`` (another step's output, its own input, or
    a folder of the user's), or the working directory or a folder above it. A missing or
    empty directory, or an earlier output of the same step, may be replaced.

    Args:
        path: the output directory.
        manifest: the file every output of the step holds (``plan.json``).

    Raises:
        SuperGCNError: naming the directory and the fix.
    """
    path = Path(path)
    if not path.is_dir():
        return
    here = Path.cwd().resolve()
    if path.resolve() in (here, *here.parents):
        raise SuperGCNError(f"output directory {path} is the working directory or holds it",
                            "name a new directory for the output")
    if not (path / manifest).is_file() and any(path.iterdir()):
        raise SuperGCNError(f"output directory {path} holds files but no {manifest}: it is not an earlier output of "
                            "this step, and writing would replace all it holds",
                            "name a new directory (or delete that one yourself if it is to go)")


@contextlib.contextmanager
def atomic_output_dir(destination: str | os.PathLike, manifest: str) -> Iterator[Path]:
    """Yield an empty temporary directory that replaces ``destination`` on success, where
    :func:`check_replaceable` allows it (``manifest``: the step's own manifest).

    On any exception the temporary directory is removed and ``destination`` is left
    exactly as it was.

    Yields:
        The staging directory to write into, beside ``destination``.

    Raises:
        SuperGCNError: ``destination`` is an existing file or under none writable
            (:func:`check_output_path`), or the disk filled while writing.
    """
    destination = Path(destination)
    check_output_path(destination, directory=True)
    check_replaceable(destination, manifest)
    destination.parent.mkdir(parents=True, exist_ok=True)
    # A killed step cannot remove its staging directory (or a scratch file named like one);
    # the next attempt does.
    for stale in destination.parent.glob(f".{glob.escape(destination.name)}.tmp-*"):
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            stale.unlink(missing_ok=True)
    with refusing_full_disk(destination):
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
    except BaseException as exc:
        written = _bytes_under(staging)
        shutil.rmtree(staging, ignore_errors=True)
        _refuse_full_disk(exc, destination, written)
        raise


#: The errors of a write that ran out of room: the device full, or the user's quota used up.
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def _out_of_space(exc: BaseException) -> bool:
    """Whether ``exc`` is a write that ran out of room: ENOSPC or EDQUOT, or numpy's
    ``tofile`` cut short ("2001 requested and 496 written", with no errno: what ``np.save``
    raises on a full disk)."""
    if not isinstance(exc, OSError):
        return False
    return exc.errno in _NO_SPACE or (exc.errno is None and re.fullmatch(r"\d+ requested and \d+ written", str(exc))
                                      is not None)


def _bytes_under(path: Path) -> int:
    """Bytes in the file ``path`` or in the files below the directory ``path`` (0 if gone)."""
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else 0


def _refuse_full_disk(exc: BaseException, destination: Path, written: int, needed: int | None = None) -> None:
    """Turn a write that found no space (its partial output already removed) into the one-line
    error: where, how much the step had written when the disk filled (it needs more) or
    how much it needs, and what is free there now."""
    if not _out_of_space(exc):
        return
    existing = next(p for p in [destination, *destination.parents] if p.exists())
    free = shutil.disk_usage(existing).free
    if needed is None:
        need = (f"the step had written {human_bytes(written)} when the disk filled (it needs more; "
                f"{human_bytes(free)}")
    else:
        need = f"it needs {human_bytes(needed)} ({human_bytes(free)}"
    raise SuperGCNError(f"no space left for {destination}: {need} free there now), and nothing is left behind",
                        "free space on that file system (or raise the quota), or write the output elsewhere") from exc


@contextlib.contextmanager
def refusing_full_disk(destination: str | os.PathLike, needed: int | None = None) -> Iterator[None]:
    """The one-line error of :func:`atomic_file` for a write towards ``destination`` made
    some other way (a file every MPI rank writes its part of, a staging directory), which
    the caller cleans up; ``needed``: the bytes it takes, where known.

    Raises:
        SuperGCNError: the write in the ``with`` block ran out of space (ENOSPC, EDQUOT); other errors pass unchanged.
    """
    try:
        yield
    except OSError as exc:
        _refuse_full_disk(exc, Path(destination), 0, needed)
        raise


def human_bytes(num_bytes: float) -> str:
    """``num_bytes`` in B, KiB, MiB or GiB.

    Returns:
        The size with one decimal (whole bytes below 1 KiB) and its unit.
    """
    for unit in ("B", "KiB", "MiB"):
        if num_bytes < 1024:
            return f"{num_bytes:.0f} B" if unit == "B" else f"{num_bytes:.1f} {unit}"
        num_bytes /= 1024
    return f"{num_bytes:.1f} GiB"


@contextlib.contextmanager
def reading_raw(dataset: str, folder: str | os.PathLike) -> Iterator[None]:
    """Turn a failure to parse a dataset's original files (a truncated download, a
    damaged copy) into a :class:`SuperGCNError` naming them; the parsers are third-party
    and fail in their own words (pickle, pandas, numpy, json).

    Args:
        dataset: the dataset's name, for the message.
        folder: where its original files are.

    Raises:
        SuperGCNError: any exception in the ``with`` block, the parsers' own included (a
            SuperGCNError passes unchanged).
    """
    try:
        yield
    except SuperGCNError:
        raise
    except Exception as exc:  # noqa: BLE001 - any parser's failure on the user's files
        raise SuperGCNError(f"the raw files of {dataset} under {folder} could not be read "
                            f"({type(exc).__name__}: {first_line(exc)}): they are truncated or damaged",
                            "restore them from the original archive (or delete them to download again)") from exc


def write_json(path: str | os.PathLike, payload: Mapping) -> None:
    """Write ``payload`` as indented JSON to ``path`` through a temporary file and a rename.

    Raises:
        SuperGCNError: ``path`` cannot be written, or the disk filled.
    """
    write_text(path, json.dumps(payload, indent=2) + "\n")


def read_json(path: str | os.PathLike, what: str) -> dict:
    """Read a manifest, turning a missing or corrupt file into a clear error.

    Args:
        path: the manifest file.
        what: what it describes (``graph``, ``plan``), for the message.

    Returns:
        The parsed JSON object.

    Raises:
        SuperGCNError: the file is missing, is not JSON or holds no JSON object.
    """
    path = Path(path)
    if not path.is_file():
        raise SuperGCNError(f"{what} manifest {path} not found", "run the step that produces it first")
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SuperGCNError(f"{what} manifest {path} is not valid JSON ({exc})",
                            "delete its directory and rerun the step") from exc
    if not isinstance(manifest, dict):
        raise SuperGCNError(f"{what} manifest {path} holds a JSON {type(manifest).__name__}, not an object",
                            "delete its directory and rerun the step")
    return manifest


def load_array(directory: Path, name: str, what: str, mmap: bool = False, suffix: str = ".npy"):
    """Load ``directory/name.npy`` (or, with ``suffix=".npz"``, open the archive) or explain
    which step to rerun: the file is missing, truncated or not an array.

    Args:
        directory: the step's output directory.
        name: the array's file name without its suffix.
        what: what the directory holds (``graph``, ``partition``), for the message.
        mmap: whether to memory-map it read-only.
        suffix: ``.npy`` or ``.npz``.

    Returns:
        The array (an :class:`numpy.lib.npyio.NpzFile` for ``.npz``).

    Raises:
        SuperGCNError: the file is missing, truncated or not an array.
    """
    path = directory / f"{name}{suffix}"
    if not path.is_file():
        raise SuperGCNError(f"{what} {directory} is incomplete: {path.name} is missing",
                            "rerun the step that wrote it")
    try:
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:  # numpy's words for a short or foreign file
        raise SuperGCNError(f"{what} {directory} is damaged: {path.name} is truncated or not a .npy array ({exc})",
                            "delete the directory and rerun the step that wrote it") from exc


def release_pages(*arrays: np.ndarray) -> None:
    """Drop the pages of memory-mapped ``arrays`` from this process's resident set.

    A pass over a memory-mapped graph leaves every page it read mapped and counted in the
    step's resident memory (the whole adjacency after one pass) although the kernel could
    reclaim them; released, they stay in the page cache and fault back in if read again.
    Arrays held in memory are left alone.
    """
    for array in arrays:
        base = array
        while base is not None and not isinstance(base, mmap.mmap):
            base = getattr(base, "base", None)
        if base is not None and hasattr(base, "madvise"):
            base.madvise(mmap.MADV_DONTNEED)


def peak_memory_mib() -> float:
    """Peak resident memory of this process's own program so far, in MiB.

    Linux's ``ru_maxrss`` is not that: it keeps, across ``execve``, the peak of the process
    this one was forked from, so a step started by Snakemake, an MPI launcher or a
    benchmark that holds gigabytes would report its parent's peak where that is larger.
    ``VmHWM`` (``/proc/self/status``) is the high-water mark of this program's memory
    alone; where there is no ``/proc``, ``ru_maxrss`` (macOS reports bytes, Linux KiB).

    Returns:
        The peak in MiB.
    """
    with contextlib.suppress(OSError), open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` that is renamed to ``path`` on success.

    Yields:
        The temporary path to write (``.<name>.tmp`` beside ``path``).

    Raises:
        SuperGCNError: ``path`` is a directory or under none writable
            (:func:`check_output_path`), or the disk filled while writing.
    """
    path = Path(path)
    check_output_path(path, directory=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as exc:
        written = _bytes_under(tmp)
        tmp.unlink(missing_ok=True)
        _refuse_full_disk(exc, path, written)
        raise


@contextlib.contextmanager
def files_written_together(directory: str | os.PathLike) -> Iterator[None]:
    """The files a step writes into ``directory`` one at a time (each through
    :func:`atomic_file`; the directory is shared with other steps' outputs) stand or fall
    together: if the step fails, those it wrote are removed, and the directory too if the
    step created it, so that no half of a set of tables or figures is left behind."""
    directory = Path(directory)
    existed = directory.exists()
    before = _file_stamps(directory)
    try:
        yield
    except BaseException:
        if not existed:
            shutil.rmtree(directory, ignore_errors=True)
        else:
            for path, stamp in _file_stamps(directory).items():
                if before.get(path) != stamp:
                    path.unlink(missing_ok=True)
        raise


def file_stamp(path: str | os.PathLike) -> tuple[int, int, int]:
    """(inode, size, mtime in ns) of the file ``path``: a file rewritten, or another renamed
    into its place (a new inode), has another.

    Args:
        path: an existing file.

    Returns:
        The stamp.
    """
    stat = os.stat(path)
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def _file_stamps(directory: Path) -> dict[Path, tuple[int, int, int]]:
    """:func:`file_stamp` of every file under ``directory``."""
    if not directory.is_dir():
        return {}
    return {path: file_stamp(path) for path in directory.rglob("*") if path.is_file()}


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to the file ``path`` (replaced if it exists) through a temporary file and a rename.

    Raises:
        SuperGCNError: ``path`` cannot be written, or the disk filled.
    """
    with atomic_file(path) as tmp:
        tmp.write_text(text)


def check_output_path(path: str | os.PathLike, directory: bool) -> Path:
    """Check, before any work, that ``path`` can be written as a file (or, with
    ``directory``, as a directory): it is not the other kind already, and the nearest
    existing folder above it is a writable directory.

    Returns:
        ``path``, as a :class:`~pathlib.Path`.

    Raises:
        SuperGCNError: naming the obstacle and how to clear it.
    """
    path = Path(path)
    if directory and path.exists() and not path.is_dir():
        raise SuperGCNError(f"output directory {path} is an existing file", "delete it or name another directory")
    if not directory and path.is_dir():
        raise SuperGCNError(f"output file {path} is an existing directory",
                            "name a file (for example one inside it) or remove the directory")
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise SuperGCNError(f"cannot create {path}: {ancestor} is a file, not a directory",
                            "choose an output path under a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise SuperGCNError(f"cannot create {path}: no write permission in {ancestor}",
                            "choose an output path you can write to")
    return path


def save_npz_columns(path: str | os.PathLike, names, column) -> None:
    """An ``.npz`` of the arrays ``column(name)`` for each of ``names``, one in memory at a
    time (``np.savez`` holds them all).

    Args:
        path: the archive to write (uncompressed, ZIP64).
        names: the arrays' names, in order.
        column: ``column(name)`` returns the array to store under ``name``.
    """
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name in names:
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, column(name))
