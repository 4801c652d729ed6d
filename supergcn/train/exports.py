"""Files a finished run can leave besides its metrics: the model and the logits."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from supergcn.data.storage import atomic_file


def save_model(model: torch.nn.Module, path: Path) -> None:
    """``model.state_dict()`` with ``torch.save``, written atomically."""
    with atomic_file(path) as tmp:
        torch.save(model.state_dict(), tmp)


def save_logits(comm, owned_old_ids: np.ndarray, logits: torch.Tensor, path: Path) -> None:
    """Every rank's log-probabilities, gathered by rank 0 and written as one ``.npy``
    array in the graph's original node order (collective)."""
    gathered = comm.gather((owned_old_ids, logits.numpy()), root=0)
    if comm.Get_rank() != 0:
        return
    ids = np.concatenate([g[0] for g in gathered])
    full = np.empty((len(ids), logits.shape[1]), dtype=np.float32)
    full[ids] = np.concatenate([g[1] for g in gathered])
    with atomic_file(path) as tmp, open(tmp, "wb") as handle:
        np.save(handle, full)
