"""Distributed full-batch training: one MPI rank per partition, exact full-graph semantics.

Every rank holds the rows of its partition and identical model parameters. An epoch is

    forward (with boundary exchanges) -> loss on the rank's loss nodes, divided by the
    GLOBAL number of loss nodes -> backward (reverse exchanges) -> barrier (measures the
    wait for slower ranks) -> one all-reduce (sum) of all gradients and the loss -> Adam.

The summed gradient equals the gradient of the single-process loss, so the model is the
one full-batch training would produce. Accuracy is evaluated with globally summed
correct/total counts; the OGB protocol value is the test accuracy at the epoch of best
validation accuracy; upstream SuperGCN keeps the model of lowest validation loss, and the
test accuracy at that epoch is reported too.

The pieces around the loop are their own modules: :mod:`~supergcn.train.data` (the
rank's rows), :mod:`~supergcn.train.labels` (label propagation's split),
:mod:`~supergcn.distributed.collectives` (parameter broadcast, gradient all-reduce),
:mod:`~supergcn.train.checkpoint`, :mod:`~supergcn.train.metrics` (the metrics file)
and :mod:`~supergcn.train.exports`.
"""

from __future__ import annotations

import resource
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from supergcn.data.storage import write_text
from supergcn.distributed.collectives import allreduce_bytes, broadcast_parameters, parameter_hash
from supergcn.distributed.comm import Communicator
from supergcn.distributed.graph_ops import GraphOps
from supergcn.distributed.protocol import RankMethod
from supergcn.distributed.rank_operators import ExchangeSettings, RankOperators
from supergcn.distributed.ranks import CollectiveError, agree, stream_seed
from supergcn.distributed.threads import set_threads
from supergcn.distributed.timing import PhaseTimer
from supergcn.errors import SuperGCNError, first_line
from supergcn.kernels.simd import kernel_target
from supergcn.methods.runtime import build_rank_method
from supergcn.models import card
from supergcn.train import exports
from supergcn.train.checkpoint import Checkpointer
from supergcn.train.config import TrainConfig
from supergcn.train.data import kept_run_identity, load_rank_data
from supergcn.train.finished import keep_finished, keeps_finished, restore_finished, run_identity
from supergcn.train.gnn import GNN
from supergcn.train.labels import LabelInputSplit
from supergcn.train.metrics import (
    epoch_record,
    metrics_text,
    peak_memory_bytes,
    print_progress,
    run_header,
    run_line,
    summary_record,
)
from supergcn.train.optimizer import adam
from supergcn.train.precision import agreed, choose
from supergcn.train.steps import FullBatchStep, OptimizerStep, RankContext, nll_share

#: The best epochs before any: by validation accuracy (the OGB protocol) and by validation
#: loss (upstream SuperGCN's checkpoint rule).
#: None where a run has no validation nodes: "not available", not 0 %.
NO_BEST = {"val_acc": None, "epoch": None, "test_acc": None,
           "val_loss": None, "val_loss_epoch": None, "test_acc_at_val_loss": None}


class Trainer:
    """The training loop of one rank (every rank of ``comm`` builds one).

    Args:
        config: the run's options.
        comm: the MPI communicator of the job, one rank per part of the plan.

    Raises:
        SuperGCNError: the options conflict, an output cannot be written, an input is
            missing, stale or damaged, the initial weights do not fit, or the graph has no
            training nodes (as :class:`~supergcn.distributed.ranks.CollectiveError`, on
            every rank).
    """

    def __init__(self, config: TrainConfig, comm) -> None:
        conflicts = config.conflicts()
        if conflicts:
            raise SuperGCNError("; ".join(conflicts))
        self.config = config
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.communicator = Communicator(comm)
        self.timer = PhaseTimer()
        set_threads(config.threads)
        agree(comm, config.check_outputs)
        self.method_card = method = config.method
        self.precision = agreed(choose(config.precision, config.model, method), self.communicator)
        bfloat16 = self.precision.bfloat16  # decided before loading: the features are read into bfloat16
        self.data = agree(comm, lambda: load_rank_data(config, self.rank, self.size, bfloat16))
        model = card(config.model)
        plans = None if method is None else method.plans_for(model)
        if plans is not None and self.data.strategy not in plans:  # the same plan on every rank
            raise CollectiveError(f"{method.title} runs on a {' or '.join(plans)} plan with {model.title}, and "
                                  f"{config.plan} is {self.data.strategy}", f"plan with --strategy {plans[0]}, or "
                                  "train another method on this plan")
        settings = ExchangeSettings(bits=config.bits, rounding=config.quantization_rounding, overlap=config.overlap,
                                    parameter_dtype=config.parameter_dtype, seed=config.seed,
                                    bfloat16_gradients=bfloat16)
        self.operators = RankOperators(self.data.plan, self.communicator, self.timer, config.kernel, settings)
        torch.manual_seed(config.seed)
        self.model = GNN(config.model, self.data.x.shape[1], config.hidden, self.data.num_classes,
                         config.num_layers, config.dropout, config.layer_norm,
                         label_propagation=config.label_rate > 0, input_norm=config.input_norm,
                         dense_dtype="bfloat16" if bfloat16 else config.dense_dtype,
                         aggregate_first=config.layers_aggregate_first,
                         first_aggregates_first=config.precomputes_input,
                         heads=config.heads, attention_dropout=config.attention_dropout,
                         row_dtype="bfloat16" if bfloat16 else "float32")
        if config.init_weights is not None:
            agree(comm, lambda: self.load_weights(config.init_weights))
        broadcast_parameters(self.model, comm)  # identical start on every rank
        self.optimizer = adam(self.model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        self.parameters = list(self.model.parameters())
        context = RankContext(config, self.data, self.operators, self.communicator, self.timer, self.model, nll_share,
                              OptimizerStep(self.parameters, self.communicator, self.optimizer, config.grad_clip,
                                            self.timer))
        # The run's compared method, built on every rank (collectively): the pieces it plugs in.
        self.method = (RankMethod() if method is None else agree(comm, lambda: build_rank_method(method, context)))
        self.operators.codec = self.method.codec
        self.ops = GraphOps(self.operators, self.method.exchange, config.precomputes_input)
        torch.manual_seed(stream_seed(config.seed, self.rank))  # this rank's dropout stream
        counts = np.array([int(m.sum()) for m in (self.data.train_mask, self.data.val_mask, self.data.test_mask)],
                          dtype=np.int64)
        self.global_counts = self.communicator.allreduce_sum(counts)
        if self.global_counts[0] == 0:
            raise CollectiveError(f"graph {self.data.graph_name!r} has no training nodes",
                                  "prepare it with a split that has some")
        self.labels = LabelInputSplit(self.data.train_mask, config.label_rate, self.communicator, config.label_draw)
        self.step = self.method.step or FullBatchStep(context, self.ops, self.labels)
        # The precision picked here, not the option: auto picks per CPU, and a checkpoint of
        # bf16 epochs must not be resumed in fp32 on a node without AMX.
        self.checkpointer = Checkpointer(config.checkpoint, config.checkpoint_every, comm,
                                         config.trajectory_fingerprint({**self.data.hashes,
                                                                        "compute": self.precision.picked}))
        self.allreduce_bytes = allreduce_bytes(self.parameters)  # per rank and epoch
        self.records: list[dict] = []
        self.best = dict(NO_BEST)
        self.start_epoch = 1

    def load_weights(self, path) -> None:
        """Start from the state dict in ``path`` (tensors only: nothing else is unpickled).

        Args:
            path: a file written by ``--save-model``.

        Raises:
            SuperGCNError: the file is missing, is not a state dict, or does not fit the model.
        """
        if not Path(path).is_file():
            raise SuperGCNError(f"initial weights {path} not found", "pass a file written by --save-model")
        try:
            state = torch.load(path, weights_only=True)
        except Exception as exc:  # noqa: BLE001 - torch's many ways of saying "not a torch file"
            raise SuperGCNError(f"initial weights {path} are not a torch state dict ({first_line(exc)})",
                                "pass a file written by --save-model") from exc
        try:
            self.model.load_state_dict(state)
        except (RuntimeError, TypeError, AttributeError, KeyError) as exc:
            raise SuperGCNError(f"initial weights {path} do not fit this model ({first_line(exc)})",
                                "pass weights saved with the same --model, --num-layers, --hidden and dataset") from exc

    def train_step(self, epoch: int) -> tuple[float, dict, dict]:
        """One epoch of training (the run's step: full batch, or the method's), timed:
        (global loss, this rank's seconds per phase, its bytes sent and received).

        Args:
            epoch: the epoch, from 1.

        Returns:
            ``(loss, seconds, traffic)``: the global loss, seconds per phase (and the CPU
            time), and ``{"sent": ..., "received": ...}`` bytes by kind of message.
        """
        self.timer.reset()
        self.timer.activate()
        sent_before = {kind: sent.copy() for kind, sent in self.communicator.bytes_sent.items()}
        received_before = {kind: got.copy() for kind, got in self.communicator.bytes_received.items()}
        usage_before = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        global_loss = self.step.run(epoch)
        seconds = self.timer.breakdown(time.perf_counter() - started)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        # CPU time of all the rank's threads: system time shows the kernel mapping and zeroing memory.
        seconds["cpu_user"] = usage.ru_utime - usage_before.ru_utime
        seconds["cpu_system"] = usage.ru_stime - usage_before.ru_stime
        sent = {kind: self.communicator.bytes_sent[kind] - sent_before[kind] for kind in sent_before}
        received = {kind: self.communicator.bytes_received[kind] - received_before[kind] for kind in received_before}
        return global_loss, seconds, {"sent": sent, "received": received}

    @torch.no_grad()
    def evaluate(self) -> tuple[dict, torch.Tensor]:
        """Global train / val / test accuracy and validation loss (None where a split is
        empty) and this rank's logits.

        Returns:
            ``(accuracy, logits)``: ``train_acc``, ``val_acc``, ``test_acc`` and
            ``val_loss``, and the rank's log-probabilities.
        """
        self.model.eval()
        # At evaluation every training label is an input (label propagation only).
        train_nodes = self.labels.train_nodes
        logits = self.model(self.data.x, self.ops, train_nodes, self.data.y[train_nodes])
        correct = logits.argmax(-1) == self.data.y
        val = self.data.val_mask
        val_nll = F.nll_loss(logits[val], self.data.y[val], reduction="sum").item() if bool(val.any()) else 0.0
        sums = np.array([int((correct & m).sum()) for m in (self.data.train_mask, val, self.data.test_mask)]
                        + [val_nll], dtype=np.float64)
        self.communicator.allreduce_sum(sums)
        accuracy = {f"{name}_acc": float(c / t) if t else None
                    for name, c, t in zip(("train", "val", "test"), sums, self.global_counts)}
        accuracy["val_loss"] = float(sums[3] / self.global_counts[1]) if self.global_counts[1] else None
        return accuracy, logits

    def track_best(self, epoch: int, accuracy: dict) -> None:
        """Remember the epochs of best validation accuracy and of lowest validation loss.

        Args:
            epoch: the epoch evaluated.
            accuracy: its :meth:`evaluate` figures.
        """
        if accuracy["val_acc"] is not None and (self.best["val_acc"] is None
                                                or accuracy["val_acc"] > self.best["val_acc"]):
            self.best.update(val_acc=accuracy["val_acc"], epoch=epoch, test_acc=accuracy["test_acc"])
        if accuracy["val_loss"] is not None and (self.best["val_loss"] is None
                                                 or accuracy["val_loss"] < self.best["val_loss"]):
            self.best.update(val_loss=accuracy["val_loss"], val_loss_epoch=epoch,
                             test_acc_at_val_loss=accuracy["test_acc"])

    def resume(self) -> None:
        """Continue from the checkpoint when asked to and a compatible one exists."""
        if not self.config.resume:
            return
        restored = self.checkpointer.restore(self.model, self.optimizer, self.config.epochs)
        if restored is None:
            return
        self.restore_rank_state(restored.rank_state)
        self.records, self.best = restored.records, {**NO_BEST, **restored.best}
        self.start_epoch = restored.epoch + 1

    def rank_state(self) -> dict:
        """What this rank needs besides the model to continue exactly: its random streams
        and the exchange state that lives across epochs.

        Returns:
            ``rng`` (torch's random state), ``quantize_calls`` (the position in the
            stochastic-rounding stream) and ``method`` (the method's
            :meth:`~supergcn.distributed.protocol.RankMethod.state`).
        """
        return {"rng": torch.get_rng_state(), "quantize_calls": self.operators.quantize_calls,
                "method": self.method.state()}

    def restore_rank_state(self, state: dict) -> None:
        """Restore what :meth:`rank_state` returned, from a checkpoint.

        Args:
            state: this rank's saved state.
        """
        torch.set_rng_state(state["rng"])
        self.operators.quantize_calls = state["quantize_calls"]
        self.method.restore(state["method"])

    def run(self) -> None:
        """Train ``config.epochs`` epochs (after any resumed ones) and write the outputs.

        Raises:
            SuperGCNError: the checkpoint to resume is damaged or of another run, the loss
                became NaN or infinite (on every rank), or an output could not be written.
            RuntimeError: the fault the config injects (``fail_at_epoch``).
        """
        self.resume()
        header = run_header(self.comm, self.config.as_json(), self.data.graph_name, self.data.strategy,
                            self.config.threads, self.data.hashes, kernel_target(), self.precision.as_json())
        entry = self.method.header()  # collective
        if header is not None and entry is not None:
            header[self.method_card.header_key] = entry
        if self.rank == 0:
            print(run_line(self.config, self.data.strategy, self.size, self.precision.picked), flush=True)
        for epoch in range(self.start_epoch, self.config.epochs + 1):
            if self.config.fail_at_epoch == epoch and self.rank == self.config.fail_rank:
                raise RuntimeError(f"injected fault at epoch {epoch}")
            self.method.begin_epoch(epoch, self.config.epochs)
            loss, seconds, traffic = self.train_step(epoch)
            if not np.isfinite(loss):
                raise CollectiveError(f"the training loss became {loss} at epoch {epoch}",
                                      "lower the learning rate (--lr) or check the input features for NaN/Inf")
            accuracy, _ = self.evaluate()
            self.track_best(epoch, accuracy)
            record = epoch_record(self.comm, epoch, loss, seconds, traffic, accuracy, self.allreduce_bytes,
                                  warm_up=epoch == self.start_epoch)
            entries = self.method.end_epoch()  # collective: the method's own figures (rank 0's)
            if self.rank == 0:
                record = {**record, **entries}
                self.records.append(record)
                print_progress(record)
            if self.checkpointer.due(epoch):
                self.checkpointer.save(epoch, self.model, self.optimizer, self.rank_state(), self.records,
                                       self.best)
        self.finish(header)

    def finish(self, header: dict | None) -> None:
        """Final evaluation and outputs; rank 0 writes the metrics file with ``header``.

        Args:
            header: the metrics header (rank 0; None on the others).

        Raises:
            SuperGCNError: an output could not be written (on every rank); none is left behind.
        """
        accuracy, logits = self.evaluate()
        hashes = self.comm.gather(parameter_hash(self.model), root=0)
        peak_memory = self.comm.gather(peak_memory_bytes(), root=0)
        written, summary = [], {}

        def write_outputs():
            if self.rank != 0:
                return
            if self.config.save_model is not None:
                exports.save_model(self.model, self.config.save_model)
                written.append(self.config.save_model)
            summary.update(summary_record(self.records, self.best, accuracy, hashes, peak_memory))
            text = metrics_text(header, self.records, summary)
            if keeps_finished(self.config):  # first, so that a finished --out always has its copy
                # The identity a launcher computes without ranks (kept_run_identity).
                identity = run_identity(self.config, self.config.trajectory_fingerprint(self.data.hashes))
                keep_finished(self.config.checkpoint, text, identity, self.size)
            write_text(self.config.out, text)
        try:
            if self.config.save_logits is not None:
                exports.save_logits(self.comm, self.data.owned_old_ids, logits, self.config.save_logits)
                written.append(self.config.save_logits)
            # Every rank ends with rank 0's error if it cannot write them (a full disk),
            # not with an abort of the job.
            agree(self.comm, write_outputs)
        except BaseException:
            if self.rank == 0:  # a run that did not finish leaves no outputs
                for path in written:
                    Path(path).unlink(missing_ok=True)
            raise
        if self.rank == 0:
            self.checkpointer.discard()
            print(summary_line(summary, self.config.out, written), flush=True)


def summary_line(summary: dict, out: Path, written: list[Path]) -> str:
    """The line rank 0 ends a run with: what the run reached, and where it wrote it.

    Args:
        summary: the metrics file's summary record.
        out: the metrics file.
        written: the other files the run wrote (model, logits).

    Returns:
        ``trained E epochs (mean epoch S s ...): best val ... -> OUT``.
    """
    test = summary["test_acc_at_best_val"]
    best = ("no validation nodes, so no best epoch" if summary["best_val_acc"] is None else
            f"best val acc {summary['best_val_acc']:.4f} at epoch {summary['best_epoch']}"
            + ("" if test is None else f", test acc {test:.4f} there"))
    also = f" (and {', '.join(map(str, written))})" if written else ""
    return (f"trained {summary['epochs']} epochs (mean epoch {summary['mean_epoch_seconds']:.4f} s, each process's "
            f"first excluded): {best} -> {out}{also}")


def train(config: TrainConfig, comm) -> None:
    """Train on ``comm`` (every rank calls this with the same ``config``).

    Writes ``config.out`` (the metrics file, :mod:`supergcn.train.metrics`) on rank 0, and
    the checkpoint, model and logits where the config asks for them. Raises on error;
    run it through :func:`supergcn.distributed.ranks.run_ranked` so that a failure on one
    rank ends the whole job.

    Args:
        config: the run's options.
        comm: the job's MPI communicator.

    Raises:
        SuperGCNError: as :class:`Trainer` and :meth:`Trainer.run`.
    """
    if keeps_finished(config) and config.resume:
        line = agree(comm, lambda: restore_finished(config.checkpoint, Path(config.out), *kept_run_identity(config))
                     if comm.Get_rank() == 0 else None)
        if comm.bcast(line, root=0) is not None:
            if comm.Get_rank() == 0:
                print(line, flush=True)
            return
    trainer = Trainer(config, comm)
    try:
        trainer.run()
        trainer.method.close()
    finally:
        trainer.communicator.close()
