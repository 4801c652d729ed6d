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
    order (collective). Rank 0 creates the file under a temporary name, every rank writes
    its own rows into it through a memory map, and rank 0 renames it once all have: no
    rank ever holds more than its own rows (gathering them took N x C floats on rank 0,
    153 GB for papers100M)."""
    num_nodes = comm.allreduce(len(owned_old_ids))
    tmp = path.with_name(f".{path.name}.tmp")
    if comm.Get_rank() == 0:
        check_output_path(path, directory=False)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(num_nodes, logits.shape[1])).flush()
    comm.Barrier()
    out = np.lib.format.open_memmap(tmp, mode="r+")
    out[owned_old_ids] = logits.numpy()
    out.flush()
    del out
    comm.Barrier()
    if comm.Get_rank() == 0:
        os.replace(tmp, path)
