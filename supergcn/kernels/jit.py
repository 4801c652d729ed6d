"""The single place that imports numba, after making sure its cache can be written, and
that picks its threading layer.

``@njit(cache=True)`` stores compiled machine code beside the sources; a read-only
install (a site-packages on a cluster) would recompile in every MPI rank at every launch.
When ``NUMBA_CACHE_DIR`` is unset and the package directory is not writable, the cache
goes to ``$XDG_CACHE_HOME/supergcn/numba`` (default ``~/.cache``).

The parallel kernels run on numba's ``workqueue`` threading layer unless
``NUMBA_THREADING_LAYER`` says otherwise. numba's default picks ``omp`` wherever the
system has a GNU OpenMP (Debian's libgomp1), and its ``omp`` layer loads that libgomp by
file name beside the one torch ships: two OpenMP runtimes in one process, each with its
own pool. ``workqueue`` is also what a machine without libgomp gets, so every machine runs
the same layer. (The first Adam step that gave a parameter different bits more often on
``omp`` was MKL's first-call race, whichever layer ran: supergcn.distributed.threads.)
"""

from __future__ import annotations

import os
from pathlib import Path

if "NUMBA_CACHE_DIR" not in os.environ and not os.access(Path(__file__).parent, os.W_OK):
    cache_home = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    os.environ["NUMBA_CACHE_DIR"] = str(cache_home / "supergcn" / "numba")

import numba  # noqa: E402

if "NUMBA_THREADING_LAYER" not in os.environ:
    # Read when the first parallel kernel starts numba's threads, so this holds even where a
    # module imported numba before this one.
    numba.config.THREADING_LAYER = "workqueue"

njit = numba.njit
prange = numba.prange
