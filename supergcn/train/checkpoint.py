"""Checkpoints of a distributed training run, written and read collectively.

A checkpoint holds the model, the optimizer, every rank's own state (its RNG state, its
position in the stochastic-rounding stream, DistGNN's rows in flight and AdaQP's bit
assignments: :meth:`supergcn.distributed.aggregation.GraphOps.state`), the metrics
records so far and the best epoch, and the *trajectory fingerprint* (:meth:`TrainConfig.trajectory_fingerprint`):
resuming continues the run to bit-identical weights, and a checkpoint of any other
configuration is ignored. Rank 0 alone reads and writes the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from supergcn.data.storage import atomic_file


@dataclass
class Restored:
    """What a checkpoint brings back besides the model and optimizer (loaded in place)."""

    epoch: int
    rank_state: object
    records: list[dict]
    best: dict


class Checkpointer:
    """Saves every ``every`` epochs to ``path`` (never when ``path`` is None or ``every`` is 0)."""

    def __init__(self, path: Path | None, every: int, comm, fingerprint: str) -> None:
        self.path = None if path is None else Path(path)
        self.every = every
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.fingerprint = fingerprint

    def due(self, epoch: int) -> bool:
        return self.path is not None and self.every > 0 and epoch % self.every == 0

    def save(self, epoch: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer, rank_state: object,
             records: list[dict], best: dict) -> None:
        """Write the checkpoint after ``epoch`` (collective: every rank calls it)."""
        rank_states = self.comm.gather(rank_state, root=0)
        if self.rank == 0:
            with atomic_file(self.path) as tmp:
                torch.save({"epoch": epoch, "fingerprint": self.fingerprint, "num_ranks": self.size,
                            "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "rank_states": rank_states, "records": records, "best": best}, tmp)
        # Nobody moves on (and possibly fails) before the checkpoint is on disk.
        self.comm.Barrier()

    def restore(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, epochs: int) -> Restored | None:
        """Load a compatible checkpoint into ``model`` and ``optimizer`` (collective).

        Rank 0 alone reads the file and broadcasts it, so every rank takes the same
        decision even where the file system shows the file to some ranks only. A
        checkpoint of another configuration, another rank count, a model of other shapes
        or a run longer than ``epochs`` is ignored, with a message: returns None.
        """
        state = None
        if self.rank == 0 and self.path is not None and self.path.exists():
            state = torch.load(self.path, weights_only=False)
        state = self.comm.bcast(state, root=0)
        if state is None:
            return None
        reason = self.incompatibility(state, model, epochs)
        if reason:
            if self.rank == 0:
                print(f"ignoring checkpoint {self.path}: {reason}; training from scratch", flush=True)
            return None
        if self.rank == 0:
            print(f"resuming from checkpoint {self.path} after epoch {state['epoch']}", flush=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        return Restored(epoch=state["epoch"], rank_state=state["rank_states"][self.rank], records=state["records"],
                        best=state["best"])

    def incompatibility(self, state: dict, model: torch.nn.Module, epochs: int) -> str | None:
        """Why ``state`` cannot continue this run, or None."""
        if state["fingerprint"] != self.fingerprint or state["num_ranks"] != self.size:
            return "written by another configuration or process count"
        if state["epoch"] > epochs:
            return f"it is at epoch {state['epoch']}, past the {epochs} epochs asked for"
        shapes = {name: tuple(t.shape) for name, t in model.state_dict().items()}
        if {name: tuple(t.shape) for name, t in state["model"].items()} != shapes:
            return "its model has other parameters (the code changed)"
        return None

    def discard(self) -> None:
        """Delete the checkpoint (rank 0): a finished run's must not short-cut a later rerun."""
        if self.rank == 0 and self.path is not None:
            self.path.unlink(missing_ok=True)
