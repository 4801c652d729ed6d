"""The memory allocator a training process runs with.

glibc's ``malloc`` serves every allocation above its mmap threshold (at most 32 MiB) with a
fresh ``mmap`` and returns it with ``munmap`` on free, so each large tensor torch or numpy
allocates in an epoch is mapped, faulted in page by page and zeroed by the kernel, again
and again. On the arxiv-shaped graph that was half the wall time of a training run as
system time (measured figures: docs/results.md, "With the allocator that comes with the
project"). jemalloc with page purging switched off
(``MALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1``) keeps freed pages and hands them
out again, so an epoch after the first allocates almost nothing from the kernel.

mimalloc with purging switched off does the same, and installs with the project: PyPI's
``cmeel-mimalloc`` ships ``libmimalloc.so`` in manylinux wheels for x86-64 and aarch64, so
every machine that runs ``make test`` or ``pip install`` has it, where jemalloc needs a
system package that CI, a fresh machine or a Fugaku job may lack.

An allocator has to be chosen before the process starts, so ``supergcn train`` re-executes
itself once with the library in ``LD_PRELOAD`` when it is not loaded yet
(:func:`relaunch_with_retaining_allocator`); this happens before MPI is initialised, so the
launcher (mpiexec, srun) sees one process per rank as usual. The environment variable
``SUPERGCN_ALLOCATOR`` chooses:

* ``auto`` (default): mimalloc from the ``cmeel-mimalloc`` wheel, else jemalloc where
  :func:`find_jemalloc` finds it, else glibc;
* ``mimalloc`` or ``jemalloc``: that one (an error if it cannot be found);
* ``glibc``: never relaunch;
* a path to a ``lib*malloc*.so``: that library (an error if it does not exist).

Each library is told to keep freed pages (:data:`RETAINING_SETTINGS`) unless the user set
that variable. A malloc already in ``LD_PRELOAD`` (tcmalloc, a user's own build) is kept.
Whatever serves ``malloc`` is recorded in the metrics header (:func:`allocator_in_use`),
however it was loaded. Nothing here imports more than the standard library: it runs before
torch and MPI are loaded.
"""

from __future__ import annotations

import os
import sys
from importlib import metadata
from pathlib import Path

from supergcn.errors import SuperGCNError

ALLOCATOR_ENV = "SUPERGCN_ALLOCATOR"
#: Per allocator, the environment variable and value that keep freed pages forever (no
#: purging): the working set of an epoch repeats exactly.
RETAINING_SETTINGS = {"jemalloc": ("MALLOC_CONF", "dirty_decay_ms:-1,muzzy_decay_ms:-1"),
                      "mimalloc": ("MIMALLOC_PURGE_DELAY", "-1")}
_RELAUNCHED_ENV = "SUPERGCN_ALLOCATOR_RELAUNCHED"
_JEMALLOC_NAMES = ("libjemalloc.so.2", "libjemalloc.so")
_MIMALLOC_DISTRIBUTION = "cmeel-mimalloc"
#: Where distributions and common cluster installs put jemalloc (Debian/Ubuntu, RHEL,
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
        for name in _JEMALLOC_NAMES:
            candidate = Path(directory) / name
            if candidate.is_file():
                return candidate
    return None


def find_mimalloc() -> Path | None:
    """``libmimalloc.so`` of the installed ``cmeel-mimalloc`` wheel (from its file list), or None."""
    try:
        distribution = metadata.distribution(_MIMALLOC_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None
    for file in distribution.files or ():
        if file.name == "libmimalloc.so":
            path = Path(distribution.locate_file(file))
            if path.is_file():
                return path
    return None


_FINDERS = {"mimalloc": find_mimalloc, "jemalloc": find_jemalloc}


def requested_library() -> Path | None:
    """The library ``SUPERGCN_ALLOCATOR`` asks for (None: glibc)."""
    choice = os.environ.get(ALLOCATOR_ENV, "auto").strip() or "auto"
    if choice == "glibc":
        return None
    if choice == "auto":
        return next((path for find in _FINDERS.values() if (path := find()) is not None), None)
    if choice in _FINDERS:
        path = _FINDERS[choice]()
        if path is None:
            raise SuperGCNError(f"{ALLOCATOR_ENV}={choice}, but no {choice} library was found",
                                "reinstall the project (`pip install -e .` brings cmeel-mimalloc), install "
                                "libjemalloc2, or set it to `auto` or `glibc`")
        return path
    path = Path(choice)
    if not path.is_file():
        raise SuperGCNError(f"{ALLOCATOR_ENV}={choice} is not a file",
                            "point it at a malloc library (libmimalloc.so, libjemalloc.so.2), or set it to "
                            "`auto`, `mimalloc`, `jemalloc` or `glibc`")
    return path


def _mapped_libraries() -> list[str]:
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    return sorted({line.split()[-1] for line in maps.splitlines() if ".so" in line.split()[-1]})


def allocator_name(library: str) -> str | None:
    """``mimalloc``, ``jemalloc``, ``tcmalloc``...: the malloc a library file provides, if any."""
    stem = Path(library).name.split(".so")[0].removeprefix("lib")
    return stem.split("_")[0] if "malloc" in stem else None


def allocator_in_use() -> dict:
    """What serves ``malloc`` in this process: ``{"name", "library", "settings"}`` — the
    first mapped library that is a malloc, or glibc; ``settings`` are the environment
    variables that tune it (``MALLOC_CONF``, ``MIMALLOC_*``, ``TCMALLOC_*``)."""
    for library in _mapped_libraries():
        name = allocator_name(library)
        if name:
            prefixes = ("MALLOC_CONF",) if name == "jemalloc" else (f"{name.upper()}_",)
            settings = {key: value for key, value in sorted(os.environ.items()) if key.startswith(prefixes)}
            return {"name": name, "library": library, "settings": settings}
    return {"name": "glibc", "library": None, "settings": {}}


def _preloads_an_allocator() -> bool:
    """Whether ``LD_PRELOAD`` already brings a malloc (tcmalloc, mimalloc, ...): the user's choice wins."""
    return any(allocator_name(entry) for entry in os.environ.get("LD_PRELOAD", "").replace(" ", ":").split(":")
               if entry)


def relaunch_with_retaining_allocator() -> None:
    """Re-execute this process with the requested malloc preloaded, when it is not loaded.

    Returns only when no relaunch is needed (or possible: another allocator preloaded, or
    this is the relaunched process); otherwise the process image is replaced and the same
    command line starts again. Call it before MPI is initialised, and only from a
    process's entry point: it re-executes the whole process (``sys.orig_argv``).
    """
    if os.environ.pop(_RELAUNCHED_ENV, None):  # this is the relaunched process; its children start afresh
        return
    library = requested_library()
    if library is None or allocator_in_use()["name"] != "glibc" or _preloads_an_allocator():
        return
    environment = dict(os.environ)
    environment[_RELAUNCHED_ENV] = "1"  # never loop, even if the preload fails to load
    environment["LD_PRELOAD"] = ":".join(filter(None, [str(library), environment.get("LD_PRELOAD")]))
    retaining = RETAINING_SETTINGS.get(allocator_name(str(library)))
    if retaining:
        environment.setdefault(*retaining)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, sys.orig_argv, environment)
