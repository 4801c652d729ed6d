"""The single place that imports numba, after making sure its cache can be written.

``@njit(cache=True)`` stores compiled machine code beside the sources; a read-only
install (a site-packages on a cluster) would recompile in every MPI rank at every launch.
When ``NUMBA_CACHE_DIR`` is unset and the package directory is not writable, the cache
goes to ``$XDG_CACHE_HOME/supergcn/numba`` (default ``~/.cache``).
"""

from __future__ import annotations

import os
from pathlib import Path

if "NUMBA_CACHE_DIR" not in os.environ and not os.access(Path(__file__).parent, os.W_OK):
    cache_home = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    os.environ["NUMBA_CACHE_DIR"] = str(cache_home / "supergcn" / "numba")

import numba  # noqa: E402

njit = numba.njit
prange = numba.prange
