"""Files a finished run can leave besides its metrics: the model and the logits."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from supergcn.data.storage import atomic_file, check_output_path


def save_model(model: torch.nn.Module, path: Path) -> None:
    """``model.state_dict()`` with ``torch.save``, written atomically."""
    with atomic_file(path) as tmp:
        torch.save(model.state_dict(), tmp)


def save_logits(comm, owned_old_ids: np.ndarray, logits: torch.Tensor, path: Path) -> None:
    """Every rank's log-probabilities as one ``.npy`` array in the graph's original node
    order (collective), no rank holding more than its own rows (gathering them took N x C
    floats on rank 0: 153 GB for papers100M).

    Rank 0 creates the file under a temporary name (its header, then the full size); every
    rank writes its rows with ``pwrite``, one call per run of consecutive node ids, so that
    no two ranks write the same bytes — a memory map would write back whole pages that mix
    ranks' rows, which file systems without coherent caches (NFS) do not merge. Rank 0
    renames the file once all have written; a rank that fails removes it before the job
    ends.
    """
    tmp = path.with_name(f".{path.name}.tmp")
    num_nodes = comm.allreduce(len(owned_old_ids))
    rows = np.ascontiguousarray(logits.numpy(), dtype=np.float32)
    if comm.Get_rank() == 0:
        check_output_path(path, directory=False)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as handle:
            header = {"descr": np.lib.format.dtype_to_descr(rows.dtype), "fortran_order": False,
                      "shape": (num_nodes, rows.shape[1])}
            np.lib.format.write_array_header_1_0(handle, header)
            handle.truncate(handle.tell() + num_nodes * rows.shape[1] * rows.itemsize)
    comm.Barrier()
    try:
        _write_rows(tmp, owned_old_ids, rows)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    comm.Barrier()
    if comm.Get_rank() == 0:
        os.replace(tmp, path)


def _write_rows(path: Path, ids: np.ndarray, rows: np.ndarray) -> None:
    """Write ``rows[k]`` as row ``ids[k]`` of the ``.npy`` array at ``path``."""
    with open(path, "r+b") as handle:
        np.lib.format.read_magic(handle)
        np.lib.format.read_array_header_1_0(handle)
        data_start = handle.tell()
        order = np.argsort(ids, kind="stable")
        ids, rows = ids[order], rows[order]
        run_starts = np.flatnonzero(np.diff(ids, prepend=-2) != 1)  # a run: consecutive node ids
        run_ends = np.append(run_starts[1:], len(ids))
        row_bytes = rows.shape[1] * rows.itemsize
        for start, end in zip(run_starts.tolist(), run_ends.tolist()):
            data, offset = memoryview(rows[start:end]).cast("B"), data_start + int(ids[start]) * row_bytes
            while data:  # one pwrite moves at most about 2 GiB on Linux
                written = os.pwrite(handle.fileno(), data, offset)
                data, offset = data[written:], offset + written
