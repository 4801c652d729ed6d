"""METIS with several balance constraints, through the METIS library itself.

pymetis passes one vertex weight only (:mod:`supergcn.partition.metis`), but METIS
balances ``ncon`` weights per vertex at once — what the paper asks for ("node weights
based on in-degree of nodes and training masks"). This module calls
``METIS_PartGraphKway`` of the METIS library through ctypes: the file named by
``SUPERGCN_LIBMETIS`` if set, else the one PyPI's ``cmeel-metis`` wheel (a dependency of
the project: METIS 5.2 for x86-64 and aarch64) puts in ``cmeel.prefix/lib``, else the
system's (Debian's ``libmetis5``, Spack's ``metis``).

METIS is built with 32- or 64-bit integers (``idx_t``; Debian's is 32-bit). The width is
probed, not assumed: ``METIS_SetDefaultOptions`` writes ``METIS_NOPTIONS`` idx_t values of
-1, so in a buffer of that many int64 sentinels a 32-bit build leaves the second half
untouched. The seed's place in the options array is probed too: METIS 5.2 inserted an
option before it (5.1: index 8; 5.2: index 9, where 8 is ``NCUTS``). A two-vertex graph
partitioned with index 8 set to 0 succeeds under 5.1 (seed 0) and is refused as bad input
under 5.2 (no cuts). Weights are row-major, ``ncon`` per vertex, as METIS reads them; the
allowed imbalance is METIS's default for every constraint (ufactor 30: 3 %).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import sys
from importlib import metadata

import numpy as np

from supergcn.errors import SuperGCNError

#: From metis.h (METIS 5): the options array's length, the seed's index in 5.1 and in 5.2,
#: and the return codes for success and for bad input.
METIS_NOPTIONS = 40
METIS_OPTION_SEED = {"5.1": 8, "5.2": 9}
METIS_OK, METIS_ERROR_INPUT = 1, -2
#: Environment variable naming the library file, where it is not on the loader's path.
LIBRARY_VARIABLE = "SUPERGCN_LIBMETIS"
#: The wheel that ships the library, and the library's place in it.
WHEEL, WHEEL_LIBRARY = "cmeel-metis", "cmeel.prefix/lib/libmetis.so"
_ABSENT_FIX = (f"install the project's dependencies again (pip install {WHEEL}), or set {LIBRARY_VARIABLE} to a "
               "METIS library; or set partition.separate_constraints to false to fold the constraints into one weight")


def library_path() -> str | None:
    """Where the METIS library is: ``SUPERGCN_LIBMETIS``, else the ``cmeel-metis`` wheel's,
    else the system's; None where there is none."""
    if os.environ.get(LIBRARY_VARIABLE):
        return os.environ[LIBRARY_VARIABLE]
    try:
        wheel = metadata.distribution(WHEEL).locate_file(WHEEL_LIBRARY)
    except metadata.PackageNotFoundError:
        wheel = None
    if wheel is not None and os.path.isfile(wheel):
        return str(wheel)
    return ctypes.util.find_library("metis")


@functools.cache
def load_metis() -> tuple[ctypes.CDLL, np.dtype, int]:
    """The METIS library, its integer type and its seed option's index, or a one-line
    error saying how to get a usable one."""
    path = library_path()
    if not path:
        raise SuperGCNError("balancing the constraints separately needs the METIS library (libmetis), "
                            "which was not found", _ABSENT_FIX)
    try:
        # The wheel's libmetis needs its libGKlib beside it, but names the folder in its
        # RUNPATH as a literal "$$ORIGIN": loaded first, the loader finds it by name.
        gklib = os.path.join(os.path.dirname(path), "libGKlib.so")
        if os.path.isfile(gklib):
            ctypes.CDLL(gklib, mode=ctypes.RTLD_GLOBAL)
        library = ctypes.CDLL(path)
        for symbol in ("METIS_SetDefaultOptions", "METIS_PartGraphKway"):  # a foreign library lacks them
            getattr(library, symbol)
    except (OSError, AttributeError) as exc:
        raise SuperGCNError(f"{path} is not a usable METIS library ({exc})", _ABSENT_FIX) from exc
    probe = np.full(METIS_NOPTIONS, 7, dtype=np.int64)
    library.METIS_SetDefaultOptions(probe.ctypes.data_as(ctypes.c_void_p))
    idx_t = np.dtype(np.int64 if probe[-1] == -1 else np.int32)
    return library, idx_t, seed_option_index(library, idx_t, path)


@contextlib.contextmanager
def _silenced_stdout():
    """File descriptor 1 (where C code prints) pointed at /dev/null while the block runs."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def seed_option_index(library, idx_t: np.dtype, path: str) -> int:
    """Where this METIS takes its seed (module docstring): 5.1 accepts a 0 at index 8."""
    options = np.empty(METIS_NOPTIONS, dtype=idx_t)
    library.METIS_SetDefaultOptions(options.ctypes.data_as(ctypes.c_void_p))
    options[METIS_OPTION_SEED["5.1"]] = 0
    with _silenced_stdout():  # METIS 5.2 prints "Input Error: Incorrect ncuts." for the probe
        status = _call_kway(library, np.array([0, 1, 2], dtype=idx_t), np.array([1, 0], dtype=idx_t),
                            np.ones((2, 1), dtype=idx_t), 2, options)[0]
    if status == METIS_OK:
        return METIS_OPTION_SEED["5.1"]
    if status == METIS_ERROR_INPUT:
        return METIS_OPTION_SEED["5.2"]
    raise SuperGCNError(f"{path} answered a two-vertex test partition with status {status}: not METIS 5.1 or 5.2",
                        _ABSENT_FIX)


def _call_kway(library, xadj, adjncy, vwgt, num_parts, options) -> tuple[int, np.ndarray]:
    """``METIS_PartGraphKway`` with no edge weights, sizes or target weights: (status, parts)."""
    idx_t = xadj.dtype

    def pointer(array):
        return array.ctypes.data_as(ctypes.c_void_p)

    nvtxs, ncon = np.array([len(xadj) - 1], dtype=idx_t), np.array([vwgt.shape[1]], dtype=idx_t)
    nparts, objval = np.array([num_parts], dtype=idx_t), np.zeros(1, dtype=idx_t)
    part = np.empty(len(xadj) - 1, dtype=idx_t)
    status = library.METIS_PartGraphKway(pointer(nvtxs), pointer(ncon), pointer(xadj), pointer(adjncy),
                                         pointer(vwgt), None, None, pointer(nparts), None, None, pointer(options),
                                         pointer(objval), pointer(part))
    return status, part


def check_fits(idx_t: np.dtype, entries: int, vertices: int, weight_total: int = 0) -> None:
    """Refuse a graph this METIS cannot count: ``entries`` adjacency entries, ``vertices``
    vertices or a constraint's ``weight_total`` beyond its ``idx_t`` (2^31 - 1 for the
    wheel's 32-bit build).

    Raises:
        SuperGCNError: naming what does not fit and KaMinPar, which counts with 64 bits.
    """
    limit = np.iinfo(idx_t).max
    if max(entries, vertices, weight_total) > limit:
        raise SuperGCNError(f"this METIS library counts with {np.dtype(idx_t).itemsize * 8}-bit integers (at most "
                            f"{limit:,}), too few for {vertices:,} vertices, {entries:,} adjacency entries and "
                            f"weight totals up to {weight_total:,}",
                            "set partition.engine to kaminpar (64-bit ids and weights), or use a METIS built with "
                            "IDXTYPEWIDTH=64 through SUPERGCN_LIBMETIS")


def part_graph_kway(xadj: np.ndarray, adjncy: np.ndarray, weights: np.ndarray, num_parts: int,
                    seed: int) -> np.ndarray:
    """METIS's k-way part of every vertex (int32), balancing every column of ``weights``
    (n x ncon non-negative integers) within 3 %.

    Raises:
        SuperGCNError: the library is missing, the graph or a weight total does not fit
            its integer type, or METIS fails.
    """
    library, idx_t, seed_index = load_metis()
    check_fits(idx_t, len(adjncy), len(xadj) - 1, int(weights.sum(axis=0).max(initial=0)))
    num_vertices, num_weights = weights.shape
    options = np.empty(METIS_NOPTIONS, dtype=idx_t)
    library.METIS_SetDefaultOptions(options.ctypes.data_as(ctypes.c_void_p))
    options[seed_index] = seed
    status, part = _call_kway(library, np.ascontiguousarray(xadj, dtype=idx_t),
                              np.ascontiguousarray(adjncy, dtype=idx_t), np.ascontiguousarray(weights, dtype=idx_t),
                              num_parts, options)
    if status != METIS_OK:
        raise SuperGCNError(f"METIS_PartGraphKway failed with status {status} on {num_vertices:,} vertices, "
                            f"{num_weights} constraints, {num_parts} parts",
                            "use fewer constraints or parts, or set partition.separate_constraints to false")
    return part.astype(np.int32)
