"""Files a finished run can leave besides its metrics: the model and the logits."""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import torch

from supergcn.data.storage import atomic_file, check_output_path, refusing_full_disk


def save_torch(payload, path: Path) -> None:
    """``torch.save(payload)`` to ``path``, written atomically. Serialised in memory first:
    torch's zip writer reports a full disk as a RuntimeError ("unexpected pos 64 vs 0")
    without an errno, where a plain write raises the ENOSPC that becomes the one-line
    error (:func:`~supergcn.data.storage.atomic_file`)."""
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    with atomic_file(path) as tmp:
        tmp.write_bytes(buffer.getbuffer())


def save_model(model: torch.nn.Module, path: Path) -> None:
    """``model.state_dict()`` with :func:`save_torch`."""
    save_torch(model.state_dict(), path)


def save_logits(comm, owned_old_ids: np.ndarray, logits: torch.Tensor, path: Path) -> None:
    """Every rank's log-probabilities as one ``.npy`` array in the graph's original node
    order (collective), no rank holding more than its own rows (gathering them took N x C
    floats on rank 0: 153 GB for papers100M).

    Rank 0 creates the file under a temporary name (its header, then the full size); every
    rank writes its rows with ``pwrite``, one call per run of consecutive node ids, so that
    no two ranks write the same bytes — a memory map would write back whole pages that mix
    ranks' rows, which file systems without coherent caches (NFS) do not merge. Rank 0
    renames the file once all have written; if any rank fails (a full disk), every rank
    learns it, the file is removed and every rank raises the same error.
    """
    from supergcn.distributed.ranks import agree

    tmp = path.with_name(f".{path.name}.tmp")
    num_nodes = comm.allreduce(len(owned_old_ids))
    rows = np.ascontiguousarray(logits.numpy(), dtype=np.float32)
    header = {"descr": np.lib.format.dtype_to_descr(rows.dtype), "fortran_order": False,
              "shape": (num_nodes, rows.shape[1])}
    needed = num_nodes * rows.shape[1] * rows.itemsize

    def create():
        if comm.Get_rank() == 0:
            check_output_path(path, directory=False)
            path.parent.mkdir(parents=True, exist_ok=True)
            with refusing_full_disk(path, needed=needed), open(tmp, "wb") as handle:
                np.lib.format.write_array_header_1_0(handle, header)
                handle.truncate(handle.tell() + needed)  # sparse: blocks come with the rows
    try:
        # Every rank learns of any rank's failure (a full disk: the one-line error on rank 0).
        agree(comm, create)
        agree(comm, lambda: _write_rows(tmp, owned_old_ids, rows, path, needed))
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if comm.Get_rank() == 0:
        os.replace(tmp, path)


def _write_rows(path: Path, ids: np.ndarray, rows: np.ndarray, destination: Path, needed: int) -> None:
    """Write ``rows[k]`` as row ``ids[k]`` of the ``.npy`` array at ``path``, which becomes
    ``destination`` (of ``needed`` bytes of rows in all)."""
    with refusing_full_disk(destination, needed=needed), open(path, "r+b") as handle:
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
