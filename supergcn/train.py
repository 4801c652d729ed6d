"""Distributed full-batch training: one MPI rank per partition, exact full-graph semantics.

Every rank holds the rows of its partition and identical model parameters. An epoch is

    forward (with boundary exchanges) -> loss on the rank's training nodes, divided by the
    GLOBAL number of training nodes (with masked label propagation: those whose label
    is not an input this epoch) -> backward (reverse exchanges) -> barrier (measures the
    wait for slower ranks) -> one all-reduce (sum) of all gradients and the loss -> Adam.

The summed gradient equals the gradient of the single-process loss, so the model is the
one full-batch training would produce. Accuracy is evaluated with globally summed
correct/total counts; the OGB protocol value is the test accuracy at the epoch of best
validation accuracy.

Output (rank 0): a JSON-lines metrics file — a ``header`` line (config, P, threads,
versions, host, git commit, graph/partition/plan hashes), one ``epoch`` line per epoch
(loss, accuracies, seconds per phase per rank, each phase's max over ranks, the phases
of the slowest rank, which add up to the epoch time, and bytes), and a
``summary`` line. The file is written under a temporary name and renamed when training
ends, so a killed run never leaves a finished-looking result; a checkpoint (model,
optimizer, every rank's RNG state, metrics so far) lets ``--resume`` continue it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from supergcn.aggregation import ExchangeSettings, GraphOps, RankOperators
from supergcn.comm import Communicator
from supergcn.errors import SuperGCNError
from supergcn.graph import load_graph, read_graph_meta
from supergcn.models import GNN
from supergcn.partition import load_partition
from supergcn.plan import load_rank_plan, read_plan_manifest
from supergcn.provenance import git_commit, host, package_versions
from supergcn.ranks import CollectiveError, agree
from supergcn.storage import atomic_file, write_text
from supergcn.timing import PHASES, PhaseTimer


@dataclass
class TrainConfig:
    graph: Path
    partition: Path
    plan: Path
    out: Path
    model: str = "sage"
    num_layers: int = 3
    hidden: int = 256
    dropout: float = 0.5
    layer_norm: bool = True
    lr: float = 0.01
    weight_decay: float = 0.0
    epochs: int = 200
    seed: int = 0
    threads: int = 1
    kernel: str = "numba"
    bits: int = 32
    rounding: str = "nearest"
    overlap: bool = True
    parameter_dtype: str = "bfloat16"
    label_rate: float = 0.0
    input_norm: bool = False
    checkpoint: Path | None = None
    checkpoint_every: int = 0
    resume: bool = False
    init_weights: Path | None = None
    save_model: Path | None = None
    save_logits: Path | None = None
    fail_at_epoch: int | None = None
    fail_rank: int = 0

    def trajectory_fingerprint(self, hashes: dict) -> str:
        """What a checkpoint must agree on to be resumed (not epochs, outputs or threads)."""
        keys = ("model", "num_layers", "hidden", "dropout", "layer_norm", "lr", "weight_decay", "seed", "bits",
                "rounding", "parameter_dtype", "label_rate", "input_norm")
        payload = json.dumps({**{k: getattr(self, k) for k in keys}, **hashes}, sort_keys=True)
        return hashlib.blake2b(payload.encode(), digest_size=12).hexdigest()

    def as_json(self) -> dict:
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(self).items()}


@dataclass
class RankData:
    """The rows of one partition: features, labels, masks, and provenance hashes."""

    x: torch.Tensor
    y: torch.Tensor
    train_mask: torch.Tensor
    val_mask: torch.Tensor
    test_mask: torch.Tensor
    owned_old_ids: np.ndarray
    plan: object
    hashes: dict
    graph_name: str
    strategy: str
    num_classes: int


def load_rank_data(config: TrainConfig, rank: int, world_size: int) -> RankData:
    meta = read_graph_meta(config.graph)
    partition, part_manifest = load_partition(config.partition, meta["hash"])
    plan_manifest = read_plan_manifest(config.plan, meta["hash"], part_manifest["partition_hash"])
    if plan_manifest["num_ranks"] != world_size:
        raise SuperGCNError(f"plan {config.plan} is for {plan_manifest['num_ranks']} ranks but {world_size} were "
                            f"started: launch with `mpiexec -n {plan_manifest['num_ranks']}`")
    plan = load_rank_plan(config.plan, rank)
    graph = load_graph(config.graph, mmap=True)
    owned = partition.new_to_old[plan.offset:plan.offset + plan.num_owned]
    as_tensor = lambda a: torch.from_numpy(np.ascontiguousarray(a[owned]))  # noqa: E731
    plan_hash = hashlib.blake2b((Path(config.plan) / "plan.json").read_bytes(), digest_size=16).hexdigest()
    return RankData(x=as_tensor(graph.features), y=as_tensor(graph.labels), train_mask=as_tensor(graph.train_mask),
                    val_mask=as_tensor(graph.val_mask), test_mask=as_tensor(graph.test_mask), owned_old_ids=owned,
                    plan=plan, graph_name=meta["name"], strategy=plan_manifest["strategy"],
                    num_classes=meta["num_classes"],
                    hashes={"graph_hash": meta["hash"], "partition_hash": part_manifest["partition_hash"],
                            "plan_hash": plan_hash})


def set_threads(threads: int) -> None:
    """Pin torch and numba to ``threads`` (mpiexec otherwise leaves torch at one thread)."""
    from supergcn._numba import numba

    torch.set_num_threads(threads)
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))


def parameter_hash(model: torch.nn.Module) -> str:
    digest = hashlib.blake2b(digest_size=16)
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()


class Trainer:
    def __init__(self, config: TrainConfig, comm) -> None:
        self.config = config
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.communicator = Communicator(comm)
        self.timer = PhaseTimer()
        set_threads(config.threads)
        self.data = agree(comm, lambda: load_rank_data(config, self.rank, self.size))
        settings = ExchangeSettings(bits=config.bits, rounding=config.rounding, overlap=config.overlap,
                                    bfloat16_parameters=config.parameter_dtype == "bfloat16", seed=config.seed)
        self.ops = GraphOps(RankOperators(self.data.plan, self.communicator, self.timer, config.kernel, settings))
        torch.manual_seed(config.seed)
        self.model = GNN(config.model, self.data.x.shape[1], config.hidden, self.data.num_classes,
                         config.num_layers, config.dropout, config.layer_norm,
                         label_propagation=config.label_rate > 0, input_norm=config.input_norm)
        if config.init_weights is not None:
            agree(comm, lambda: self.load_weights(config.init_weights))
        for tensor in self.model.state_dict().values():  # identical start on every rank
            comm.Bcast(tensor.numpy(), root=0)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        torch.manual_seed(config.seed * 1_000_003 + self.rank)  # this rank's dropout stream
        counts = np.array([int(m.sum()) for m in (self.data.train_mask, self.data.val_mask, self.data.test_mask)],
                          dtype=np.int64)
        self.global_counts = self.communicator.allreduce_sum(counts)
        if self.global_counts[0] == 0:
            raise CollectiveError(f"graph {self.data.graph_name!r} has no training nodes")
        # Masked label propagation: each epoch, label_rate of every rank's training nodes
        # get their label as input and the others carry the loss.
        self.train_nodes = torch.nonzero(self.data.train_mask).reshape(-1)
        self.num_label_inputs = int(round(config.label_rate * len(self.train_nodes)))
        loss_nodes = np.array([len(self.train_nodes) - self.num_label_inputs], dtype=np.int64)
        self.global_loss_nodes = int(self.communicator.allreduce_sum(loss_nodes)[0])
        if self.global_loss_nodes == 0:
            raise CollectiveError(f"label rate {config.label_rate} leaves no training node for the loss")
        self.fingerprint = config.trajectory_fingerprint(self.data.hashes)
        self.records: list[dict] = []
        self.best = {"val_acc": -1.0, "epoch": 0, "test_acc": 0.0}
        self.start_epoch = 1

    def load_weights(self, path: Path) -> None:
        try:
            self.model.load_state_dict(torch.load(path, weights_only=True))
        except (OSError, RuntimeError) as exc:
            raise SuperGCNError(f"cannot load initial weights from {path}: {exc}") from exc

    # -- one epoch ------------------------------------------------------------------
    def train_step(self) -> tuple[float, dict, dict]:
        self.timer.reset()
        bytes_before = {kind: sent.copy() for kind, sent in self.communicator.bytes_sent.items()}
        received_before = {kind: got.copy() for kind, got in self.communicator.bytes_received.items()}
        started = time.perf_counter()
        self.model.train()
        self.ops.operators.training = True
        self.optimizer.zero_grad(set_to_none=False)
        label_nodes, loss_nodes = self.split_training_nodes()
        logits = self.model(self.data.x, self.ops, label_nodes, self.data.y[label_nodes])
        loss = F.nll_loss(logits[loss_nodes], self.data.y[loss_nodes], reduction="sum") / self.global_loss_nodes
        loss.backward()
        with self.timer.phase("synchronization"):
            self.comm.Barrier()
        params = [p for p in self.model.parameters()]
        flat = torch.cat([p.grad.reshape(-1) for p in params] + [loss.detach().reshape(1)]).numpy()
        with self.timer.phase("communication"):
            self.communicator.allreduce_sum(flat)
        offset = 0
        for p in params:
            p.grad.copy_(torch.from_numpy(flat[offset:offset + p.numel()]).view_as(p))
            offset += p.numel()
        self.optimizer.step()
        seconds = self.timer.breakdown(time.perf_counter() - started)
        sent = {kind: self.communicator.bytes_sent[kind] - bytes_before[kind] for kind in bytes_before}
        received = {kind: self.communicator.bytes_received[kind] - received_before[kind] for kind in received_before}
        return float(flat[-1]), seconds, {"sent": sent, "received": received}

    def split_training_nodes(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(nodes whose label is an input, nodes that carry the loss) for one epoch."""
        if self.num_label_inputs == 0:
            return self.train_nodes[:0], self.train_nodes
        order = self.train_nodes[torch.randperm(len(self.train_nodes))]
        return order[:self.num_label_inputs], order[self.num_label_inputs:]

    @torch.no_grad()
    def evaluate(self) -> tuple[dict, torch.Tensor]:
        self.model.eval()
        self.ops.operators.training = False
        # At evaluation every training label is an input (label propagation only).
        logits = self.model(self.data.x, self.ops, self.train_nodes, self.data.y[self.train_nodes])
        correct = logits.argmax(-1) == self.data.y
        counts = np.array([int((correct & m).sum()) for m in (self.data.train_mask, self.data.val_mask,
                                                              self.data.test_mask)], dtype=np.int64)
        self.communicator.allreduce_sum(counts)
        accuracy = {f"{name}_acc": float(c / t) if t else None
                    for name, c, t in zip(("train", "val", "test"), counts, self.global_counts)}
        return accuracy, logits

    # -- checkpoints ----------------------------------------------------------------
    def save_checkpoint(self, epoch: int) -> None:
        rng_states = self.comm.gather((torch.get_rng_state(), self.ops.operators.quantize_calls), root=0)
        if self.rank == 0:
            with atomic_file(self.config.checkpoint) as tmp:
                torch.save({"epoch": epoch, "fingerprint": self.fingerprint, "num_ranks": self.size,
                            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                            "rng": rng_states, "records": self.records, "best": self.best}, tmp)
        # Nobody moves on (and possibly fails) before the checkpoint is on disk.
        self.comm.Barrier()

    def maybe_resume(self) -> None:
        """Continue from the checkpoint if ``--resume`` and a compatible one exists.

        Rank 0 alone reads the file and broadcasts it, so every rank takes the same
        decision even where the file system shows the file to some ranks only. A
        checkpoint of another configuration, another rank count, a model of other shapes
        or a run longer than this one is ignored (training starts from scratch).
        """
        path = self.config.checkpoint
        state = None
        if self.rank == 0 and self.config.resume and path is not None and Path(path).exists():
            state = torch.load(path, weights_only=False)
        state = self.comm.bcast(state, root=0)
        if state is None:
            return
        reason = self._incompatibility(state)
        if reason:
            if self.rank == 0:
                print(f"ignoring checkpoint {path}: {reason}; training from scratch", flush=True)
            return
        if self.rank == 0:
            print(f"resuming from checkpoint {path} after epoch {state['epoch']}", flush=True)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        rng_state, self.ops.operators.quantize_calls = state["rng"][self.rank]
        torch.set_rng_state(rng_state)
        self.records, self.best = state["records"], state["best"]
        self.start_epoch = state["epoch"] + 1

    def _incompatibility(self, state: dict) -> str | None:
        if state["fingerprint"] != self.fingerprint or state["num_ranks"] != self.size:
            return "written by another configuration or process count"
        if state["epoch"] > self.config.epochs:
            return f"it is at epoch {state['epoch']}, past the {self.config.epochs} epochs asked for"
        shapes = {name: tuple(t.shape) for name, t in self.model.state_dict().items()}
        if {name: tuple(t.shape) for name, t in state["model"].items()} != shapes:
            return "its model has other parameters (the code changed)"
        return None

    # -- the run --------------------------------------------------------------------
    def header(self) -> dict | None:
        hosts = self.comm.gather(host(), root=0)
        if self.rank != 0:  # versions and the git commit are looked up once, not P times
            return None
        return {"type": "header", "config": self.config.as_json(), "dataset": self.data.graph_name,
                "strategy": self.data.strategy, "num_ranks": self.size, "threads_per_rank": self.config.threads,
                "hosts": hosts, "versions": package_versions(), "git_commit": git_commit(),
                "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **self.data.hashes}

    def epoch_record(self, epoch, loss, seconds, traffic, accuracy) -> dict | None:
        """Rank 0's metrics line of one epoch (``traffic``: this rank's bytes sent and received)."""
        per_rank = self.comm.gather(seconds, root=0)
        traffic = self.comm.gather(traffic, root=0)
        if self.rank != 0:
            return None
        slowest = max(per_rank, key=lambda r: r["total"])
        return {"type": "epoch", "epoch": epoch, "loss": loss, **accuracy,
                "seconds": {"max": {k: max(r[k] for r in per_rank) for k in (*PHASES, "other", "total")},
                            "slowest_rank": slowest, "per_rank": per_rank},
                "bytes": {"sent_total": int(sum(t["sent"][k].sum() for t in traffic for k in t["sent"])),
                          "data_sent_total": int(sum(t["sent"]["data"].sum() for t in traffic)),
                          "params_sent_total": int(sum(t["sent"]["params"].sum() for t in traffic)),
                          "sent_per_rank": [int(sum(v.sum() for v in t["sent"].values())) for t in traffic],
                          "received_per_rank": [int(sum(v.sum() for v in t["received"].values())) for t in traffic],
                          "allreduce_per_rank": int(sum(p.numel() for p in self.model.parameters()) + 1) * 4}}

    def run(self) -> None:
        self.maybe_resume()
        partial = Path(f"{self.config.out}.partial")
        header = self.header()
        if self.rank == 0:
            write_text(partial, "".join(json.dumps(r) + "\n" for r in [header, *self.records]))
        for epoch in range(self.start_epoch, self.config.epochs + 1):
            if self.config.fail_at_epoch == epoch and self.rank == self.config.fail_rank:
                raise RuntimeError(f"injected fault at epoch {epoch}")
            loss, seconds, traffic = self.train_step()
            if not np.isfinite(loss):
                raise CollectiveError(f"the training loss became {loss} at epoch {epoch}: lower the learning rate "
                                      "(--lr) or check the input features for NaN/Inf")
            accuracy, _ = self.evaluate()
            if accuracy["val_acc"] is not None and accuracy["val_acc"] > self.best["val_acc"]:
                self.best = {"val_acc": accuracy["val_acc"], "epoch": epoch, "test_acc": accuracy["test_acc"]}
            record = self.epoch_record(epoch, loss, seconds, traffic, accuracy)
            if self.rank == 0:
                self.records.append(record)
                with open(partial, "a") as metrics:
                    metrics.write(json.dumps(record) + "\n")
            if self.config.checkpoint and self.config.checkpoint_every and epoch % self.config.checkpoint_every == 0:
                self.save_checkpoint(epoch)
        self.finish(partial)

    def finish(self, partial: Path) -> None:
        accuracy, logits = self.evaluate()
        hashes = self.comm.gather(parameter_hash(self.model), root=0)
        if self.config.save_logits is not None:
            gathered = self.comm.gather((self.data.owned_old_ids, logits.numpy()), root=0)
            if self.rank == 0:
                ids = np.concatenate([g[0] for g in gathered])
                full = np.empty((len(ids), logits.shape[1]), dtype=np.float32)
                full[ids] = np.concatenate([g[1] for g in gathered])
                with atomic_file(self.config.save_logits) as tmp, open(tmp, "wb") as handle:
                    np.save(handle, full)
        if self.rank != 0:
            return
        if self.config.save_model is not None:
            with atomic_file(self.config.save_model) as tmp:
                torch.save(self.model.state_dict(), tmp)
        epoch_seconds = [r["seconds"]["max"]["total"] for r in self.records]
        summary = {"type": "summary", "epochs": len(self.records),
                   "mean_epoch_seconds": float(np.mean(epoch_seconds[1:] or epoch_seconds)),
                   "best_val_acc": self.best["val_acc"], "best_epoch": self.best["epoch"],
                   "test_acc_at_best_val": self.best["test_acc"], "final": accuracy,
                   "parameter_hash_per_rank": hashes, "identical_parameters": len(set(hashes)) == 1}
        with open(partial, "a") as metrics:
            metrics.write(json.dumps(summary) + "\n")
        os.replace(partial, self.config.out)
        if self.config.checkpoint is not None:
            # A finished run's checkpoint must not short-cut a later rerun (after a code change).
            Path(self.config.checkpoint).unlink(missing_ok=True)


def train(config: TrainConfig, comm) -> None:
    """Train on ``comm`` (every rank calls this); raises on error (see :mod:`supergcn.ranks`)."""
    trainer = Trainer(config, comm)
    try:
        trainer.run()
    finally:
        trainer.communicator.close()
