"""METIS with several balance constraints, through the METIS library itself.

pymetis passes one vertex weight only (:mod:`supergcn.partition.metis`), but METIS
balances ``ncon`` weights per vertex at once — what the paper asks for ("node weights
based on in-degree of nodes and training masks"). This module calls
``METIS_PartGraphKway`` of the system's METIS library (Debian's ``libmetis5``, Spack's
``metis``, or the file named by ``SUPERGCN_LIBMETIS``) through ctypes, found at run time.

METIS is built with 32- or 64-bit integers (``idx_t``; Debian's is 32-bit). The width is
probed, not assumed: ``METIS_SetDefaultOptions`` writes ``METIS_NOPTIONS`` idx_t values of
-1, so in a buffer of that many int64 sentinels a 32-bit build leaves the second half
untouched. Weights are row-major, ``ncon`` per vertex, as METIS reads them; the allowed
imbalance is METIS's default for every constraint (ufactor 30: 3 %).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

import numpy as np

from supergcn.errors import SuperGCNError

#: From metis.h (METIS 5): the options array's length, the seed's index, the success code.
METIS_NOPTIONS = 40
METIS_OPTION_SEED = 8
METIS_OK = 1
#: Environment variable naming the library file, where it is not on the loader's path.
LIBRARY_VARIABLE = "SUPERGCN_LIBMETIS"
_ABSENT_FIX = ("install the METIS library (Debian/Ubuntu: apt-get install libmetis5; Spack: spack load metis) or "
               f"set {LIBRARY_VARIABLE} to its file; or set partition.separate_constraints to false to fold the "
               "constraints into one weight")


@functools.cache
def load_metis() -> tuple[ctypes.CDLL, np.dtype]:
    """The METIS library and its integer type, or a one-line error saying how to get it."""
    path = os.environ.get(LIBRARY_VARIABLE) or ctypes.util.find_library("metis")
    if not path:
        raise SuperGCNError("balancing the constraints separately needs the METIS library (libmetis), "
                            "which was not found", _ABSENT_FIX)
    try:
        library = ctypes.CDLL(path)
        for symbol in ("METIS_SetDefaultOptions", "METIS_PartGraphKway"):  # a foreign library lacks them
            getattr(library, symbol)
    except (OSError, AttributeError) as exc:
        raise SuperGCNError(f"{path} is not a usable METIS library ({exc})", _ABSENT_FIX) from exc
    probe = np.full(METIS_NOPTIONS, 7, dtype=np.int64)
    library.METIS_SetDefaultOptions(probe.ctypes.data_as(ctypes.c_void_p))
    return library, np.dtype(np.int64 if probe[-1] == -1 else np.int32)


def part_graph_kway(xadj: np.ndarray, adjncy: np.ndarray, weights: np.ndarray, num_parts: int,
                    seed: int) -> np.ndarray:
    """METIS's k-way part of every vertex (int32), balancing every column of ``weights``
    (n x ncon non-negative integers) within 3 %.

    Raises:
        SuperGCNError: the library is missing, the graph or a weight total does not fit
            its integer type, or METIS fails.
    """
    library, idx_t = load_metis()
    limit = np.iinfo(idx_t).max
    totals = weights.sum(axis=0)
    if len(adjncy) > limit or int(totals.max(initial=0)) > limit:
        raise SuperGCNError(f"this METIS library counts with {idx_t.itemsize * 8}-bit integers, too few for "
                            f"{len(adjncy):,} adjacency entries and weight totals up to {int(totals.max()):,}",
                            "use a METIS built with IDXTYPEWIDTH=64, or partition.engine kaminpar")
    num_vertices, num_weights = weights.shape

    def scalar(value):
        return np.array([value], dtype=idx_t)

    def pointer(array):
        return array.ctypes.data_as(ctypes.c_void_p)

    xadj, adjncy = np.ascontiguousarray(xadj, dtype=idx_t), np.ascontiguousarray(adjncy, dtype=idx_t)
    vwgt = np.ascontiguousarray(weights, dtype=idx_t)
    options = np.empty(METIS_NOPTIONS, dtype=idx_t)
    library.METIS_SetDefaultOptions(pointer(options))
    options[METIS_OPTION_SEED] = seed
    nvtxs, ncon, nparts, objval = scalar(num_vertices), scalar(num_weights), scalar(num_parts), scalar(0)
    part = np.empty(num_vertices, dtype=idx_t)
    status = library.METIS_PartGraphKway(pointer(nvtxs), pointer(ncon), pointer(xadj), pointer(adjncy),
                                         pointer(vwgt), None, None, pointer(nparts), None, None, pointer(options),
                                         pointer(objval), pointer(part))
    if status != METIS_OK:
        raise SuperGCNError(f"METIS_PartGraphKway failed with status {status} on {num_vertices:,} vertices, "
                            f"{num_weights} constraints, {num_parts} parts",
                            "use fewer constraints or parts, or set partition.separate_constraints to false")
    return part.astype(np.int32)
