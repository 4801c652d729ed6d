"""Checkpoints of a distributed training run, written and read collectively.

A checkpoint holds the model, the optimizer, every rank's own state (its RNG state, its
position in the stochastic-rounding stream and its compared method's state, such as
DistGNN's rows in flight or AdaQP's bit assignments: :meth:`supergcn.train.trainer.Trainer.rank_state`), the metrics
records so far and the best epoch, and the *trajectory fingerprint* (:meth:`TrainConfig.trajectory_fingerprint`):
resuming continues the run to bit-identical weights, and a checkpoint of any other
configuration is ignored; a damaged or foreign file is an error (nothing in it is
unpickled but tensors, numpy arrays and plain values). Rank 0 alone reads and writes the
file; each rank writes its own state beside it (``<file>.epoch<E>.rank<R>``), since rows in
flight (DistGNN's, PipeGCN's) are an exchange's worth per rank, and gathering every
rank's on rank 0 held them all in one process (a P = 4 PipeGCN run of synthetic-arxiv was
killed for memory there).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from supergcn.distributed.ranks import CollectiveError, agree
from supergcn.errors import SuperGCNError, first_line
from supergcn.train.exports import save_torch

#: What a checkpoint holds.
CHECKPOINT_KEYS = frozenset({"epoch", "fingerprint", "num_ranks", "model", "optimizer", "rank_states", "records",
                             "best"})
#: Besides tensors and plain Python values, a checkpoint holds numpy arrays (DistGNN's rows
#: in flight, AdaQP's assignments); these are the globals unpickling them needs.
NUMPY_GLOBALS = [np.ndarray, np.dtype, np.zeros(0).__reduce__()[0],
                 *{type(np.dtype(code)) for code in np.typecodes["All"]}]


def read_checkpoint(path: Path) -> dict:
    """A checkpoint's contents, unpickling nothing but tensors, numpy arrays and plain
    Python values (``torch.load(weights_only=True)``): a foreign file cannot run code.

    Raises:
        SuperGCNError: the file is truncated, not a torch file, or not a checkpoint.
    """
    fix = "delete it to train from scratch, or pass the checkpoint of this run"
    try:
        with torch.serialization.safe_globals(NUMPY_GLOBALS):
            state = torch.load(path, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - torch's many ways of saying "not a checkpoint"
        raise SuperGCNError(f"checkpoint {path} is damaged or not a supergcn checkpoint ({refusal(exc)})",
                            fix) from exc
    if not isinstance(state, dict) or not CHECKPOINT_KEYS <= state.keys():
        raise SuperGCNError(f"{path} is a torch file but not a supergcn checkpoint", fix)
    return state


def refusal(exc: BaseException) -> str:
    """Why torch refused a file: the line after its weights-only preamble, when it has one."""
    marker = "WeightsUnpickler error:"
    text = str(exc)
    if marker in text:
        reason = [line.strip() for line in text.split(marker, 1)[1].splitlines() if line.strip()]
        if reason:
            return reason[0]
    return first_line(exc)


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

    def rank_path(self, epoch: int, rank: int) -> Path:
        """The file of ``rank``'s own state in the checkpoint after ``epoch``."""
        return self.path.with_name(f"{self.path.name}.epoch{epoch}.rank{rank}")

    def save(self, epoch: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer, rank_state: object,
             records: list[dict], best: dict) -> None:
        """Write the checkpoint after ``epoch`` (collective: every rank calls it): every rank's
        own state first, then rank 0's file, which names the epoch whose states it goes with;
        then the states of the checkpoint before it are deleted."""
        agree(self.comm, lambda: save_torch({"epoch": epoch, "fingerprint": self.fingerprint, "rank_state": rank_state},
                                            self.rank_path(epoch, self.rank)))

        def write():
            if self.rank == 0:
                save_torch({"epoch": epoch, "fingerprint": self.fingerprint, "num_ranks": self.size,
                            "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                            "rank_states": None, "records": records, "best": best}, self.path)
        # Nobody moves on before the checkpoint is on disk, and every rank stops with rank
        # 0's error if it cannot be written (a full disk).
        agree(self.comm, write)
        for older in self.path.parent.glob(f"{self.path.name}.epoch*.rank{self.rank}"):
            if older != self.rank_path(epoch, self.rank):
                older.unlink(missing_ok=True)

    def _rank_state(self, epoch: int) -> object:
        """This rank's own state in the checkpoint after ``epoch``."""
        path = self.rank_path(epoch, self.rank)
        if not path.exists():
            raise SuperGCNError(f"checkpoint {self.path} has no state of rank {self.rank} ({path} is missing)",
                                "delete the checkpoint to train from scratch")
        with torch.serialization.safe_globals(NUMPY_GLOBALS):
            state = torch.load(path, weights_only=True)
        if state.get("epoch") != epoch or state.get("fingerprint") != self.fingerprint:
            raise SuperGCNError(f"{path} does not belong to checkpoint {self.path}",
                                "delete the checkpoint to train from scratch")
        return state["rank_state"]

    def restore(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, epochs: int) -> Restored | None:
        """Load a compatible checkpoint into ``model`` and ``optimizer`` (collective).

        Rank 0 alone reads the file and broadcasts what every rank needs (model,
        optimizer, epoch, best), so every rank takes the same decision even where the file
        system shows the file to some ranks only; each rank reads its own state (or, from a
        checkpoint that holds them all, gets it scattered), and the epoch records, which
        rank 0 alone writes, stay there. A checkpoint of another configuration, another rank
        count, a model of other shapes or a run longer than ``epochs`` is ignored, with a
        message: returns None.
        """
        state, problem = None, None
        if self.rank == 0 and self.path is not None and self.path.exists():
            try:
                state = read_checkpoint(self.path)
            except SuperGCNError as exc:
                problem = str(exc)
        own = ("rank_states", "records")
        shared = None if state is None else {key: value for key, value in state.items() if key not in own}
        beside = state is not None and state["rank_states"] is None
        shared, problem, beside = self.comm.bcast((shared, problem, beside), root=0)
        if problem is not None:
            raise CollectiveError(problem)
        if shared is None:
            return None
        reason = self.incompatibility(shared, model, epochs)
        if reason:
            if self.rank == 0:
                print(f"ignoring checkpoint {self.path}: {reason}; training from scratch", flush=True)
            return None
        if beside:
            rank_state = agree(self.comm, lambda: self._rank_state(shared["epoch"]))
        else:
            rank_state = self.comm.scatter(state["rank_states"] if self.rank == 0 else None, root=0)
        records = state["records"] if self.rank == 0 else []
        if self.rank == 0:
            print(f"resuming from checkpoint {self.path} after epoch {shared['epoch']}", flush=True)
        model.load_state_dict(shared["model"])
        optimizer.load_state_dict(shared["optimizer"])
        return Restored(epoch=shared["epoch"], rank_state=rank_state, records=records, best=shared["best"])

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
        """Delete the checkpoint (rank 0): a finished run's must not short-cut a later rerun.
        The folders above it that this leaves empty go too (a study's checkpoint root would
        otherwise keep one empty folder per run), up to the first that holds anything else
        and never the working directory or a folder above it."""
        if self.rank != 0 or self.path is None:
            return
        self.path.unlink(missing_ok=True)
        for rank_file in self.path.parent.glob(f"{self.path.name}.epoch*.rank*"):
            rank_file.unlink(missing_ok=True)
        kept = {Path.cwd().resolve(), *Path.cwd().resolve().parents}
        for folder in self.path.resolve().parents:
            if folder in kept:
                return
            try:
                folder.rmdir()  # only an empty folder can be removed: nothing else is lost
            except OSError:  # not empty (another run's checkpoint), or never made
                return
