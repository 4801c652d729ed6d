"""The memory allocator a training process runs with.

glibc's ``malloc`` serves every allocation above its mmap threshold (at most 32 MiB) with a
fresh ``mmap`` and returns it with ``munmap`` on free, so each large tensor torch or numpy
allocates in an epoch is mapped, faulted in page by page and zeroed by the kernel, again
and again. On the arxiv-shaped graph that was half the wall time of a training run as
system time (measured figures: README, "Where the epoch goes, and how fast it is"). jemalloc with page purging
switched off (``MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1``) keeps freed pages
and hands them out again, so an epoch after the first allocates almost nothing from the
kernel.

An allocator has to be chosen before the process starts, so ``supergcn train`` re-executes
itself once with jemalloc in ``LD_PRELOAD`` when it finds the library and it is not loaded
yet (:func:`relaunch_with_retaining_allocator`); this happens before MPI is initialised,
so the launcher (mpiexec, srun) sees one process per rank as usual. The environment
variable ``SUPERGCN_ALLOCATOR`` chooses:

* ``auto`` (default): jemalloc if :func:`find_jemalloc` finds it, else glibc;
* ``glibc``: never relaunch;
* a path to ``libjemalloc.so``: that library (an error if it does not exist).

Whatever ran is recorded in the metrics header (:func:`allocator_in_use`). Nothing here
imports more than the standard library: it runs before torch and MPI are loaded.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from supergcn.errors import SuperGCNError

ALLOCATOR_ENV = "SUPERGCN_ALLOCATOR"
#: Keep freed pages forever (no purging): the working set of an epoch repeats exactly.
RETAINING_MALLOC_CONF = "dirty_decay_ms:-1,muzzy_decay_ms:-1"
_RELAUNCHED_ENV = "SUPERGCN_ALLOCATOR_RELAUNCHED"
_LIBRARY_NAMES = ("libjemalloc.so.2", "libjemalloc.so")
#: Where distributions and common cluster installs put the library (Debian/Ubuntu, RHEL,
#: /usr/local); ``LD_LIBRARY_PATH`` (environment modules, Spack) and ``$CONDA_PREFIX/lib``
#: are searched first.
_SYSTEM_DIRECTORIES = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
                       "/usr/local/lib", "/usr/local/lib64")


def find_jemalloc() -> Path | None:
    """The jemalloc shared library to preload, or None when there is none to be found."""
    directories = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    prefix = os.environ.get("CONDA_PREFIX")
    if prefix:
        directories.append(f"{prefix}/lib")
    for directory in [*directories, *_SYSTEM_DIRECTORIES]:
        for name in _LIBRARY_NAMES:
            candidate = Path(directory) / name
            if candidate.is_file():
                return candidate
    return None


def requested_library() -> Path | None:
    """The library ``SUPERGCN_ALLOCATOR`` asks for (None: glibc)."""
    choice = os.environ.get(ALLOCATOR_ENV, "auto").strip() or "auto"
    if choice == "glibc":
        return None
    if choice == "auto":
        return find_jemalloc()
    path = Path(choice)
    if not path.is_file():
        raise SuperGCNError(f"{ALLOCATOR_ENV}={choice} is not a file",
                            "point it at libjemalloc.so.2, or set it to `auto` or `glibc`")
    return path


def _mapped_libraries() -> list[str]:
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    return sorted({line.split()[-1] for line in maps.splitlines() if ".so" in line.split()[-1]})


def allocator_in_use() -> dict:
    """What serves ``malloc`` in this process: ``{"name", "library", "malloc_conf"}``."""
    for library in _mapped_libraries():
        if "jemalloc" in Path(library).name:
            return {"name": "jemalloc", "library": library, "malloc_conf": os.environ.get("MALLOC_CONF")}
    return {"name": "glibc", "library": None, "malloc_conf": None}


def _preloads_an_allocator() -> bool:
    """Whether ``LD_PRELOAD`` already brings a malloc (tcmalloc, mimalloc, ...): the user's choice wins."""
    return any("malloc" in Path(entry).name for entry in os.environ.get("LD_PRELOAD", "").replace(" ", ":").split(":")
               if entry)


def relaunch_with_retaining_allocator() -> None:
    """Re-execute this process with jemalloc preloaded, when one is requested and not loaded.

    Returns only when no relaunch is needed (or possible: another allocator preloaded, or
    this is the relaunched process); otherwise the process image is replaced and the same
    command line starts again. Call it before MPI is initialised, and only from a
    process's entry point: it re-executes the whole process (``sys.orig_argv``).
    """
    if os.environ.pop(_RELAUNCHED_ENV, None):  # this is the relaunched process; its children start afresh
        return
    library = requested_library()
    if library is None or allocator_in_use()["name"] == "jemalloc" or _preloads_an_allocator():
        return
    environment = dict(os.environ)
    environment[_RELAUNCHED_ENV] = "1"  # never loop, even if the preload fails to load
    environment["LD_PRELOAD"] = ":".join(filter(None, [str(library), environment.get("LD_PRELOAD")]))
    environment.setdefault("MALLOC_CONF", RETAINING_MALLOC_CONF)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, sys.orig_argv, environment)
