"""The authors' aggregation kernel, called on our CSR arrays for a side-by-side measurement.

SuperGCN's public code (``zhuangbility111/super_gnn``) builds its kernels as a torch
extension, ``supergnn_ops``; nothing of it ships with this project. A user who built it
(``python setup.py build_ext --inplace`` in its ``super_gnn/ops``) points
``supergcn bench kernels --authors-ops DIR`` at the folder holding the built module.
Its ``spmm(rowptr, col, value, mat, out, rows, row_split, col_split)`` *adds* ``A mat``
into ``out`` with one OpenMP thread per contiguous range of rows in ``row_split``, which
its Python side cuts greedily by non-zeros (``distribute_work_for_row``); rows without
entries are not written, so ``out`` must start at zero. Its backward applies the same
kernel to the CSR of A^T.
"""

from __future__ import annotations

import ctypes
import importlib.util
from pathlib import Path

import numpy as np
import torch

from supergcn.errors import SuperGCNError

MODULE = "supergnn_ops"


def load_authors_ops(folder: str | Path):
    """The ``supergnn_ops`` extension module built in ``folder``."""
    folder = Path(folder)
    built = sorted(folder.glob(f"{MODULE}*.so"))
    if not built:
        raise SuperGCNError(f"no {MODULE}*.so in {folder}",
                            "build the authors' kernels there first: `python setup.py build_ext --inplace` in "
                            "super_gnn/ops of github.com/zhuangbility111/super_gnn, then pass that folder")
    spec = importlib.util.spec_from_file_location(MODULE, built[0])
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError as error:
        raise SuperGCNError(f"{built[0]} does not load here: {error}",
                            "rebuild it against this environment's torch") from error
    return module


def row_split(indptr: np.ndarray, threads: int) -> np.ndarray:
    """The authors' ``distribute_work_for_row``: rows cut greedily so that each thread's
    range holds about 1/threads of the non-zeros (int32 boundaries, threads + 1 of them)."""
    per_row = np.diff(indptr)
    target = per_row.sum() // threads
    splits = np.full(threads + 1, len(per_row), dtype=np.int32)
    splits[0] = 0
    running, thread = 0, 0
    for row, work in enumerate(per_row):
        running += work
        if running > target and thread < threads:
            thread += 1
            splits[thread] = row
            running = work
    splits[-1] = len(per_row)
    return splits


class AuthorsSpmm:
    """``out += A x`` with the authors' kernel on the CSR ``(indptr, indices)``, run on
    ``threads`` OpenMP threads of the runtime the extension links."""

    def __init__(self, module, indptr: np.ndarray, indices: np.ndarray, threads: int) -> None:
        # dlsym through the extension finds the OpenMP runtime it was linked with, which
        # need not be torch's.
        ctypes.CDLL(module.__file__).omp_set_num_threads(threads)
        self.module = module
        self.indptr = torch.from_numpy(np.ascontiguousarray(indptr, dtype=np.int64))
        self.indices = torch.from_numpy(np.ascontiguousarray(indices, dtype=np.int64))
        self.values = torch.ones(len(indices))
        self.rows = len(indptr) - 1
        self.row_split = torch.from_numpy(row_split(np.asarray(indptr), threads))

    def __call__(self, x: np.ndarray, out: np.ndarray) -> None:
        columns = torch.tensor([0, x.shape[1]], dtype=torch.int32)
        self.module.spmm(self.indptr, self.indices, self.values, torch.from_numpy(x), torch.from_numpy(out),
                         self.rows, self.row_split, columns)
