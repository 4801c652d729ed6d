"""The single place that imports numba, after making sure its cache can be written, and
that picks its threading layer and has cached kernels compile one process at a time.

``@njit(cache=True)`` stores compiled machine code beside the sources; a read-only
install (a site-packages on a cluster) would recompile in every MPI rank at every launch.
When ``NUMBA_CACHE_DIR`` is unset and the package directory is not writable, the cache
goes to ``$XDG_CACHE_HOME/supergcn/numba`` (default ``~/.cache``). The ranks that first
call a kernel together would each compile it; :func:`njit` has them take turns, so one
compiles and the others load its cache. numba compiles a kernel again for each mix of
read-only and writable arrays it is given; :func:`read_only` gives the kernels that never
write an input one kind of array, whichever their caller had.

The parallel kernels run on numba's ``workqueue`` threading layer unless
``NUMBA_THREADING_LAYER`` says otherwise. numba's default picks ``omp`` wherever the
system has a GNU OpenMP (Debian's libgomp1), and its ``omp`` layer loads that libgomp by
file name beside the one torch ships: two OpenMP runtimes in one process, each with its
own pool. ``workqueue`` is also what a machine without libgomp gets, so every machine runs
the same layer. (The first Adam step that gave a parameter different bits more often on
``omp`` was MKL's first-call race, whichever layer ran: supergcn.distributed.threads.)
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

if "NUMBA_CACHE_DIR" not in os.environ and not os.access(Path(__file__).parent, os.W_OK):
    cache_home = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    os.environ["NUMBA_CACHE_DIR"] = str(cache_home / "supergcn" / "numba")

import numba  # noqa: E402
from numba.core.compiler_lock import global_compiler_lock  # noqa: E402

if "NUMBA_THREADING_LAYER" not in os.environ:
    # Read when the first parallel kernel starts numba's threads, so this holds even where a
    # module imported numba before this one.
    numba.config.THREADING_LAYER = "workqueue"

prange = numba.prange

# The lock files this process holds: a kernel whose compilation needs another's (a helper
# it calls) takes that one's lock inside its own, and a kernel's lock is never taken twice.
_held: set[str] = set()


def read_only(array):
    """A read-only view of ``array``, to pass to a kernel that never writes it.

    numba types a read-only array apart from a writable one and compiles each mix of flags
    on its own: a memory-mapped graph (read-only) and the same arrays in memory (writable)
    would each cost a compilation (about 12 s of one core for the gather, once per
    machine). A kernel whose callers pass its inputs through this has one compilation per
    dtype. No data is copied.

    Args:
        array: a numpy array.

    Returns:
        A view of the same memory that cannot be written through.
    """
    view = array.view()
    view.flags.writeable = False
    return view


def njit(function=None, **options):
    """``numba.njit``, whose cached kernels compile one process at a time.

    Where ``cache=True``, each new signature's compilation (or load from the cache) holds an
    exclusive ``flock`` on a file beside the kernel's cache index, inside numba's own
    compiler lock. So when the ranks of a job, or the processes of a node, first call a
    kernel together, one compiles it and the others load what it saved, where each would
    otherwise compile it, every one at once. The order (numba's lock, then the file's) is
    the same in every thread and process, and a process that dies drops its lock. Where the
    file cannot be locked (a read-only cache, a file system without locks), the kernel
    compiles as numba would.

    Args:
        function: the Python function, or None when called with options alone.
        **options: numba.njit's options.

    Returns:
        The dispatcher, or a decorator that makes one.
    """
    if function is None:
        return lambda function: njit(function, **options)
    dispatcher = numba.njit(**options)(function)
    # numba keeps the index's path on a private attribute; a numba without it compiles as before.
    index = getattr(getattr(getattr(dispatcher, "_cache", None), "_cache_file", None), "_index_path", None)
    if options.get("cache") and index is not None:
        dispatcher.compile = _compiled_in_turn(dispatcher.compile, index + ".lock")
    return dispatcher


def _compiled_in_turn(compile_here, lock_path: str):
    def compile(signature):
        with global_compiler_lock:
            if lock_path in _held:
                return compile_here(signature)
            try:
                handle = open(lock_path, "a")  # noqa: SIM115 (a with block below closes it)
            except OSError:
                return compile_here(signature)
            with handle:  # closing the file drops its lock
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX)
                except OSError:
                    return compile_here(signature)
                _held.add(lock_path)
                try:
                    return compile_here(signature)
                finally:
                    _held.discard(lock_path)
    return compile
