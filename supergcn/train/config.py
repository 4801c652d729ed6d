"""Everything one training run is asked to do, with the defaults of the paper's Table 2.

Every option is written once, here, as a field of :class:`TrainConfig` (:func:`supergcn.options.option`):
the command line of ``supergcn train``, the ``training`` section of a study's config
schema (its keys, types, ranges and defaults), the settings file a study hands each job
and the checkpoint's trajectory fingerprint are derived from these declarations.
Standard library only: the Snakefile reads them while it parses.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from supergcn.models import card
from supergcn.naming import (
    ADAPTIVE,
    ADAPTIVE_GROUP_SIZE,
    ADAPTIVE_PERIOD,
    ADAPTIVE_WEIGHT,
    BIT_CHOICES,
    DEFAULT_FANOUTS,
    DEFAULT_PARAMETER_DTYPE,
    DENSE_DTYPES,
    FANOUTS_PATTERN,
    GNN_MODELS,
    HEC_DELAY,
    HEC_LIFE,
    HEC_PUSH,
    HEC_SIZE,
    KERNELS,
    LABEL_DRAWS,
    MIXTURE_OF_PARALLELISM,
    PARALLELISMS,
    PARAMETER_DTYPES,
    PIPELINED_SCHEDULES,
    ROUNDINGS,
    SYNCHRONOUS,
    Variant,
    check_schedule,
    is_pipelined,
    schedule_delay,
)
from supergcn.options import Range, declared, is_read, option, problems, trajectory_keys

#: The share of training labels fed as inputs in the paper's label-propagation runs.
UPSTREAM_LABEL_RATE = 0.62

_AT_LEAST_1 = Range(int, 1)
_AT_LEAST_0 = Range(int, 0)
_SHARE = Range(float, 0, 1, high_open=True)
#: PipeGCN's smoothing momentum (its --corr-momentum default).
PIPE_MOMENTUM = 0.95
#: ``precompute_input``'s values: ``auto`` is on for BNS-GCN's and PipeGCN's runs, as their scripts.
PRECOMPUTE_CHOICES = ("auto", "on", "off")
#: Bytes of an int64 row pointer or column index of MixGCN's replicated adjacency, and of the
#: float32 value per entry the torch kernels' CSR tensor keeps besides (the numba gathers keep none).
INDEX_BYTES, TORCH_VALUE_BYTES = 8, 4
#: Renumbering the copy (:mod:`supergcn.methods.mixgcn`) holds at most three int64 arrays of
#: N and three of nnz at once (the gather's offsets and their two terms, then the old column ids
#: and the new): three times the copy the numba kernels keep, and about 1 KiB of the objects
#: around them, measured with tracemalloc; 64 KiB covers those.
REPLICATION_BUILD_FACTOR, REPLICATION_BUILD_OVERHEAD = 3, 64 * 2**10


def replicated_adjacency_bytes(num_nodes: int, entries: int, kernel: str = "numba") -> int:
    """Bytes of the copy of the whole adjacency every rank of MixGCN's mixture of parallelism
    keeps: ``8 (N + 1) + 8 nnz`` (int64 row pointers and column indices; the graph is
    symmetric, so Â serves as its own transpose), ``+ 4 nnz`` with the torch kernels.

    Args:
        num_nodes: N, the graph's nodes.
        entries: nnz, its directed adjacency entries (``num_edges_directed`` of its manifest).
        kernel: the sparse kernels (:data:`~supergcn.naming.KERNELS`).

    Returns:
        The bytes, as the run's metrics header records them per rank.
    """
    values = TORCH_VALUE_BYTES * entries if kernel == "torch" else 0
    return INDEX_BYTES * (num_nodes + 1 + entries) + values


def replication_peak_bytes(num_nodes: int, entries: int) -> int:
    """The most a rank of the mixture of parallelism holds for its copy while it builds it:
    ``3 · 8 (N + 1 + nnz)`` (:data:`REPLICATION_BUILD_FACTOR`) and 64 KiB, which also bounds
    the copy kept with either kernel (at most ``8 (N + 1) + 12 nnz``).

    Args:
        num_nodes: N, the graph's nodes.
        entries: nnz, its directed adjacency entries.

    Returns:
        The bytes.
    """
    return REPLICATION_BUILD_FACTOR * replicated_adjacency_bytes(num_nodes, entries) + REPLICATION_BUILD_OVERHEAD


def _adaptive(values: dict) -> bool:
    return values["bits"] == ADAPTIVE


def _minibatch(values: dict) -> bool:
    return values.get("batch_size", 0) > 0


def _precompute_read(values: dict) -> bool:
    """Whether ``precompute_input`` matters: set, or ``auto`` in a run of BNS-GCN or PipeGCN."""
    return (values.get("precompute_input", "auto") != "auto" or values.get("boundary_rate", 1) < 1
            or is_pipelined(values.get("schedule", SYNCHRONOUS)))


def _own_defaults(name: str) -> str:
    """The help's note of the models with their own default of option ``name``."""
    own = [f"{card(model).title} {card(model).training_defaults[name]}" for model in GNN_MODELS
           if name in card(model).training_defaults]
    return f" (unless set: {', '.join(own)})" if own else ""


def _read_by_model(name: str):
    """``read_when`` of an option only some models read: those whose card lists it."""
    return lambda values: name in card(values["model"]).training_options


def parse_bits(text: str) -> int | str:
    """Bits of exchanged values: a number, or ``adaptive``.

    Args:
        text: the command line's text.

    Returns:
        ``adaptive`` as is, else the number.

    Raises:
        ValueError: neither ``adaptive`` nor an integer.
    """
    return text if text == ADAPTIVE else int(text)


def parse_fanouts(text: str) -> str:
    """Mini-batch fan-outs: neighbours drawn per layer, comma-separated, the input layer's
    first (DGL's order), each at least 1 or -1 for every neighbour.

    Args:
        text: the command line's text, e.g. ``5,10,15``.

    Returns:
        ``text``, checked.

    Raises:
        argparse.ArgumentTypeError: not a comma-separated list of such counts.
    """
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        counts = []
    if not counts or any(count < 1 and count != -1 for count in counts):
        raise argparse.ArgumentTypeError(f"fan-outs are counts >= 1 (or -1 for all), comma-separated, not {text!r}")
    return text


def parse_schedule(text: str) -> str:
    """An exchange schedule: sync, 0c, cd-<r> or PipeGCN's (:func:`supergcn.naming.check_schedule`).

    Args:
        text: the command line's text.

    Returns:
        ``text``, checked.

    Raises:
        argparse.ArgumentTypeError: no schedule of that form.
    """
    try:
        check_schedule(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


@dataclass
class TrainConfig:
    """One training run. ``graph``, ``partition`` and ``plan`` are step output
    directories, ``out`` the metrics file (JSON lines) to write; every field is an option
    whose help says what it takes. ``fail_at_epoch`` and ``fail_rank`` make that rank fail
    at the start of that epoch, for the tests of the abort path."""

    graph: Path = option(None, "prepared graph directory", group="io", required=True)
    partition: Path = option(None, "partition directory of that graph", group="io", required=True)
    plan: Path = option(None, "plan directory of that partition", group="io", required=True)
    out: Path = option(None, "metrics file (JSON lines) to write", group="io", required=True)
    model: str = option("sage", "GNN architecture", choices=GNN_MODELS, study=True, trajectory=True)
    heads: int = option(4, "GAT: attention heads (concatenated in hidden layers, so they divide the hidden width; "
                        "averaged in the last)", values=_AT_LEAST_1, study=True, trajectory=True,
                        read_when=_read_by_model("heads"))
    attention_dropout: float = option(0.0, "GAT: dropout probability on the attention coefficients, in [0, 1)",
                                      values=_SHARE, study=True, trajectory=True,
                                      read_when=_read_by_model("attention_dropout"))
    num_layers: int = option(3, "graph convolutions", values=_AT_LEAST_1, study=True, trajectory=True)
    hidden: int = option(256, "hidden width", values=_AT_LEAST_1, study=True, trajectory=True, per_dataset=True)
    dropout: float = option(0.5, "dropout probability, in [0, 1)", values=_SHARE, study=True, trajectory=True)
    layer_norm: bool = option(True, "LayerNorm after each hidden layer", study=True, trajectory=True)
    lr: float = option(0.01, "Adam's learning rate" + _own_defaults("lr"), values=Range(float, 0, low_open=True),
                       study=True, trajectory=True, per_dataset=True)
    weight_decay: float = option(0.0, "Adam's weight decay", values=Range(float, 0), study=True, trajectory=True)
    grad_clip: float = option(0.0, "clip the gradients' global L2 norm to this before each step (0 = off)",
                              values=Range(float, 0), study=True, trajectory=True)
    epochs: int = option(200, "epochs to train", values=_AT_LEAST_1, study=True, per_dataset=True)
    seed: int = option(0, "seed of the initial weights, dropout, label draws and stochastic rounding",
                       trajectory=True)
    label_rate: float = option(
        0.0, "masked label propagation: share of training labels fed as inputs each epoch (0 = off; the paper "
        f"uses {UPSTREAM_LABEL_RATE}; a study's label-propagation variants use this share)", values=_SHARE,
        study=True, trajectory=True, study_values=Range(float, 0, 1, low_open=True, high_open=True),
        study_default=UPSTREAM_LABEL_RATE)
    label_draw: str = option(
        "exact", "label inputs each epoch: exactly the rate's share of the training nodes, or each node with the "
        "rate's probability and the loss over the expected count (upstream)", choices=LABEL_DRAWS, study=True,
        trajectory=True, read_when=lambda values: values["label_rate"] > 0)
    input_norm: bool = option(False, "LayerNorm on the input features before the first layer", study=True,
                              trajectory=True)
    dense_dtype: str = option(
        "float32", "type the linear layers' GEMMs run in; bfloat16 is about 3x faster where the CPU has bf16 "
        "matrix instructions (AVX512_BF16, AMX, SVE BF16), at bf16 precision", choices=DENSE_DTYPES, study=True,
        trajectory=True)
    aggregate_first: bool = option(
        False, "aggregate before every linear layer, as upstream SuperGCN (exchanges input-width rows); by default "
        "a layer narrowing its width transforms first and exchanges fewer bytes", study=True, trajectory=True)
    threads: int = option(1, "torch and numba threads per rank", values=_AT_LEAST_1, group="execution")
    kernel: str = option("numba", "sparse kernels: numba (optimised, default) or torch (torch.sparse.mm "
                         "reference)", choices=KERNELS, group="execution", study=True)
    memory_per_rank: int = option(
        0, "MiB each rank may use (a study hands execution.mem_mb_per_rank): a run of --parallelism mop whose copy "
        "of the whole adjacency does not fit, at its peak while built, is refused before any rank starts (0 = not "
        "checked)", values=_AT_LEAST_0, group="execution")
    bits: int | str = option(
        32, "32 = float32; 8, 4, 2 = per-row quantized embeddings and gradients; adaptive = 2, 4 or 8 per message "
        "group, assigned by AdaQP's solver", values=parse_bits, choices=BIT_CHOICES, group="exchange",
        trajectory=True)
    rounding: str = option("nearest", "quantization rounding: nearest (upstream) or stochastic (unbiased, AdaQP)",
                           choices=ROUNDINGS, group="exchange", study=True, trajectory=True)
    overlap: bool = option(True, "overlap the exchange with the local aggregation", group="exchange", study=True)
    schedule: str = option(
        SYNCHRONOUS, "sync (every epoch); DistGNN's delayed partial aggregates: cd-<r> (a bucket of them per "
        "epoch, added r epochs later; cd-0 = sync) or 0c (never); or PipeGCN's rows and gradients one epoch stale, "
        "exchanged behind the next epoch's compute: pipe, or pipe-f, pipe-g, pipe-fg with the received features, "
        "gradients or both smoothed (--pipe-momentum); PipeGCN's layers aggregate before they transform",
        values=parse_schedule, group="exchange", trajectory=True)
    pipe_momentum: float = option(
        PIPE_MOMENTUM, "pipe-f, pipe-g, pipe-fg: gamma of the moving average of received rows, avg = gamma avg + "
        "(1 - gamma) received (PipeGCN: 0.95)", values=_SHARE, group="exchange", study=True, trajectory=True,
        read_when=lambda values: values["schedule"] in PIPELINED_SCHEDULES and values["schedule"] != "pipe")
    boundary_rate: float = option(
        1.0, "BNS-GCN: share of its boundary rows each rank samples per peer and epoch, floor(rate x rows), in "
        "[0, 1]; each is sent scaled by rows/sampled, the unsampled ones' edges are dropped for the epoch "
        "(1 = every row, the plain exchange)", values=Range(float, 0, 1), group="exchange", trajectory=True,
        read_when=lambda values: values.get("boundary_rate", 1) != 1)
    parallelism: str = option(
        "partition", "partition: each rank aggregates its part's rows and exchanges their boundary (SuperGCN and the "
        "other baselines); mop: MixGCN's mixture of parallelism, each rank aggregates a slice of the feature columns "
        "of every node over a copy of the whole adjacency, and two all-to-all transposes a layer move the slices to "
        "the part's rows for the update and back (the plan's strategy is not used)", choices=PARALLELISMS,
        group="exchange", trajectory=True,
        read_when=lambda values: values.get("parallelism", "partition") != "partition")
    precompute_input: str = option(
        "auto", "layer 0's aggregation of the input features computed once before training, so layer 0 "
        "exchanges nothing (BNS-GCN's and PipeGCN's --use-pp): on, off, or auto = on for their runs (a boundary "
        "rate below 1 or a pipe schedule) where the input is the plain features", choices=PRECOMPUTE_CHOICES,
        group="exchange", study=True, trajectory=True, read_when=_precompute_read)
    batch_size: int = option(
        0, "DistGNN-MB: seed nodes per mini-batch on each rank, sampled on its own partition with halo rows from "
        "the historical embedding cache (0 = full-batch training)", values=_AT_LEAST_0, group="minibatch",
        trajectory=True, read_when=_minibatch)
    fanouts: str = option(
        DEFAULT_FANOUTS, "neighbours drawn per node and layer, comma-separated, the input layer's first as DGL orders "
        "them (-1 = all); one per layer", values=parse_fanouts, group="minibatch", trajectory=True,
        read_when=_minibatch)
    hec_size: int = option(HEC_SIZE, "lines of each layer's historical embedding cache", values=_AT_LEAST_1,
                           group="minibatch", trajectory=True, read_when=_minibatch)
    hec_push: int = option(HEC_PUSH, "embeddings each rank pushes to each peer per layer and step (0 = none: local "
                           "training)", values=_AT_LEAST_0, group="minibatch", trajectory=True,
                           read_when=_minibatch)
    hec_life: int = option(HEC_LIFE, "steps a cache line lives", values=_AT_LEAST_0, group="minibatch",
                           trajectory=True, read_when=_minibatch)
    hec_delay: int = option(HEC_DELAY, "steps after which a push is awaited and stored", values=_AT_LEAST_1,
                            group="minibatch", trajectory=True, read_when=_minibatch)
    hec_flush: bool = option(False, "empty every cache at the start of each epoch, as DistGNN-MB's published code "
                             "does (its paper does not)", group="minibatch", trajectory=True,
                             read_when=_minibatch)
    adaptive_weight: float = option(
        ADAPTIVE_WEIGHT, "adaptive bits: lambda, the weight of quantization variance against exchange time (1 = all "
        "8 bits, 0 = all 2 bits; AdaQP uses 0.5)", values=Range(float, 0, 1), group="exchange", study=True,
        trajectory=True, read_when=_adaptive)
    adaptive_group_size: int = option(ADAPTIVE_GROUP_SIZE, "adaptive bits: rows per message group sharing a width",
                                      values=_AT_LEAST_1, group="exchange", study=True, trajectory=True,
                                      read_when=_adaptive)
    adaptive_period: int = option(
        ADAPTIVE_PERIOD, "adaptive bits: epochs between re-assignments (traced in epoch 1, 1 + period, ...)",
        values=_AT_LEAST_1, group="exchange", study=True, trajectory=True, read_when=_adaptive)
    parameter_dtype: str = option(DEFAULT_PARAMETER_DTYPE, "wire type of the per-row zero point and scale",
                                  choices=tuple(PARAMETER_DTYPES), group="exchange", study=True, trajectory=True)
    checkpoint: Path | None = option(None, "checkpoint file (written atomically; deleted, with the folders "
                                     "it leaves empty, when the run finishes)", group="execution")
    checkpoint_every: int = option(0, "epochs between checkpoints (0 = never)", values=_AT_LEAST_0,
                                   group="execution", study=True)
    resume: bool = option(False, "continue from --checkpoint when it exists", group="execution")
    init_weights: Path | None = option(None, "state_dict to start from instead of the seeded init",
                                       group="execution")
    save_model: Path | None = option(None, "write the final state_dict here", group="execution")
    save_logits: Path | None = option(None, "final log-probabilities (original node order)", group="execution")
    # Fault injection for the tests of the abort path; not for users (no help).
    fail_at_epoch: int | None = option(None, group="execution")
    fail_rank: int = option(0, group="execution")

    def trajectory_fingerprint(self, hashes: dict) -> str:
        """What a checkpoint must agree on to be resumed: the options declared as changing
        the trajectory (:func:`supergcn.options.trajectory_keys`) and the input hashes.

        Args:
            hashes: the input hashes (graph, partition, plan) by name.

        Returns:
            24 hexadecimal digits.
        """
        payload = json.dumps({**{k: getattr(self, k) for k in trajectory_keys(self)}, **hashes}, sort_keys=True)
        return hashlib.blake2b(payload.encode(), digest_size=12).hexdigest()

    def conflicts(self) -> list[str]:
        """One message (with its fix) per value an option does not take and per combination
        of options that cannot run together.

        Returns:
            The messages; empty when the run can go ahead.
        """
        found = problems(self)
        model = card(self.model)
        found += model.conflicts(self)
        found += self._method_conflicts(model)
        if schedule_delay(self.schedule) != 0:
            if not model.delayable:
                delayable = ", ".join(name for name in GNN_MODELS if card(name).delayable)
                found.append(f"schedule {self.schedule} (DistGNN) is defined for the mean aggregation only — "
                             f"use --model {delayable} or --schedule sync")
            if self.bits != 32:
                found.append(f"schedule {self.schedule} (DistGNN) sends float32 partial aggregates — "
                             "use --bits 32 or --schedule sync")
        return found

    @property
    def input_is_plain(self) -> bool:
        """Whether layer 0's input is the features themselves (no label inputs, no input norm)."""
        return self.label_rate == 0 and not self.input_norm

    @property
    def precomputes_input(self) -> bool:
        """Whether layer 0's aggregation is computed once before training (``precompute_input``)."""
        if self.precompute_input == "auto":
            published = self.boundary_rate < 1 or is_pipelined(self.schedule)
            return published and self.input_is_plain and card(self.model).linear_aggregation
        return self.precompute_input == "on"

    @property
    def layers_aggregate_first(self) -> bool:
        """Whether every layer aggregates before it transforms: ``aggregate_first``, or a
        PipeGCN schedule, whose stale rows are a layer's input (not input times stale weights)."""
        return self.aggregate_first or is_pipelined(self.schedule) or self.mixes_parallelism

    @property
    def mixes_parallelism(self) -> bool:
        """Whether the run uses MixGCN's mixture of parallelism (``parallelism`` ``mop``),
        whose layers aggregate before they update (its Alg. 2)."""
        return self.parallelism == MIXTURE_OF_PARALLELISM

    def _method_conflicts(self, model) -> list[str]:
        """What BNS-GCN's sampling, PipeGCN's schedules and the precomputed input cannot run with."""
        found = []
        methods = [(self.boundary_rate < 1, f"boundary rate {self.boundary_rate} (BNS-GCN)", "--boundary-rate 1"),
                   (is_pipelined(self.schedule), f"schedule {self.schedule} (PipeGCN)", "--schedule sync")]
        for used, what, off in methods:
            if used and not model.linear_aggregation:
                linear = "|".join(name for name in GNN_MODELS if card(name).linear_aggregation)
                found.append(f"{what} needs an aggregation that is a sum of rows — use --model {linear}, or {off}")
            if used and self.bits != 32:
                found.append(f"{what} sends float32 rows — use --bits 32 or {off}")
        if self.mixes_parallelism:
            found += self._mixture_conflicts(model)
        if self.trains_minibatch:
            found += self._minibatch_conflicts()
        if self.boundary_rate < 1 and self.schedule != SYNCHRONOUS:
            found.append(f"boundary rate {self.boundary_rate} (BNS-GCN) samples the synchronous exchange — use "
                         "--schedule sync or --boundary-rate 1")
        if self.precompute_input == "on":
            if not (self.input_is_plain and model.linear_aggregation):
                found.append("--precompute-input on needs the plain features as layer 0's input and a sum of rows as "
                             "its aggregation — leave out label propagation and --input-norm, use --model sage, gcn "
                             "or gin, or --precompute-input off")
            if schedule_delay(self.schedule) != 0:
                found.append(f"--precompute-input on is BNS-GCN's and PipeGCN's; DistGNN's schedule {self.schedule} "
                             "delays every layer — use --precompute-input off")
        return found

    @property
    def trains_minibatch(self) -> bool:
        """Whether the run trains DistGNN-MB's mini-batches (``batch_size`` above 0)."""
        return self.batch_size > 0

    @property
    def fanout_counts(self) -> list[int]:
        """``fanouts`` as counts, the input layer's first."""
        return [int(part) for part in self.fanouts.split(",")]

    def _minibatch_conflicts(self) -> list[str]:
        """What DistGNN-MB's mini-batch training cannot run with: it trains GraphSAGE or GAT
        (its paper's two models) on float32 rows of its own partition and the cache, with the
        plain features as input."""
        found, off = [], "or --batch-size 0"
        if not card(self.model).trains_on_blocks:
            blocks = " or ".join(name for name in GNN_MODELS if card(name).trains_on_blocks)
            found.append(f"--batch-size {self.batch_size} (DistGNN-MB) trains --model {blocks} here — use one "
                         f"{off}")
        if len(self.fanout_counts) != self.num_layers:
            found.append(f"--fanouts {self.fanouts} gives {len(self.fanout_counts)} layers, the model has "
                         f"{self.num_layers} — give one fan-out per layer")
        others = [(self.bits != 32, f"--bits {self.bits}", "--bits 32"),
                  (self.schedule != SYNCHRONOUS, f"--schedule {self.schedule}", "--schedule sync"),
                  (self.boundary_rate < 1, f"--boundary-rate {self.boundary_rate}", "--boundary-rate 1"),
                  (self.mixes_parallelism, "--parallelism mop", "--parallelism partition"),
                  (not self.input_is_plain, "label propagation or --input-norm", "--label-rate 0 and no --input-norm"),
                  (self.precompute_input == "on", "--precompute-input on", "--precompute-input off")]
        found += [f"--batch-size {self.batch_size} (DistGNN-MB) does not run with {what} — use {fix} {off}"
                  for used, what, fix in others if used]
        return found

    def _mixture_conflicts(self, model) -> list[str]:
        """What MixGCN's mixture of parallelism cannot run with: it moves float32 column
        slices of every row, synchronously, and aggregates element-wise."""
        found = []
        off = "or --parallelism partition"
        if not model.linear_aggregation:
            linear = "|".join(name for name in GNN_MODELS if card(name).linear_aggregation)
            found.append(f"--parallelism mop (MixGCN) aggregates column slices element-wise — use --model {linear}, "
                         f"{off}")
        if self.bits != 32:
            found.append(f"--parallelism mop (MixGCN) moves float32 column slices — use --bits 32 {off}")
        if self.schedule != SYNCHRONOUS or self.boundary_rate < 1:
            found.append("--parallelism mop (MixGCN) has no boundary to delay or sample — use --schedule sync and "
                         f"--boundary-rate 1 {off}")
        if self.precompute_input == "on":
            found.append("--parallelism mop (MixGCN) holds the input in column slices — use --precompute-input off "
                         + off)
        return found

    def check_outputs(self) -> None:
        """Refuse, before any work, the files this run writes that could not be written at
        the end (the command line checks them as it parses; this is for callers of the API)."""
        from supergcn.data.storage import check_output_path

        for path in (self.out, self.checkpoint, self.save_model, self.save_logits):
            if path is not None:
                check_output_path(path, directory=False)

    def as_json(self) -> dict:
        """The run's options as JSON values (paths as strings), for the metrics header and the
        checkpoint.

        Returns:
            Field name -> value, every field.
        """
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(self).items()}


def study_options() -> list[str]:
    """The options a study's ``training`` section sets.

    Returns:
        Their names, in field order.
    """
    return [field.name for field, spec in declared(TrainConfig) if spec["study"]]


def with_model_defaults(values: dict, given) -> dict:
    """``values`` with the model's own training defaults
    (``training_defaults`` of its :class:`~supergcn.models.card.ModelCard`) for the options the user did
    not set: GIN trains at its own learning rate unless one is given.

    Args:
        values: option name -> value.
        given: the names of the options the user set.

    Returns:
        The values the run uses.
    """
    model = values.get("model", default("model"))
    if model not in GNN_MODELS:
        return values  # refused, with its fix, where the values are checked
    own = card(model).training_defaults
    return {**values, **{name: value for name, value in own.items() if name not in given}}


def minibatch_properties() -> dict:
    """JSON schema properties of a study variant's ``minibatch`` settings: the options of
    :class:`TrainConfig`'s ``minibatch`` group, each taking what its command-line option takes,
    but a batch size of at least 1 (0 would train full batches) and fan-outs spelled as
    :data:`~supergcn.naming.FANOUTS_PATTERN` (as the variant's name reads them back).

    Returns:
        Option name -> JSON schema: a range, a pattern or ``boolean``; the option's default
        (none for the batch size, which the variant gives) and its help as ``description``.
    """
    fanouts = {"type": "string", "pattern": f"^{FANOUTS_PATTERN}$",
               "message": "{value} is not fan-outs such as \"5,10,15\": a count of at least 1 (or -1, every "
                          "neighbour) per layer, the input layer's first, comma-separated"}
    properties = {}
    for field, spec in declared(TrainConfig):
        if spec["group"] != "minibatch":
            continue
        if field.name == "batch_size":
            keywords = Range(int, 1).schema()
        elif spec["values"] is parse_fanouts:
            keywords = {**fanouts, "default": field.default}
        elif isinstance(spec["values"], Range):
            keywords = {**spec["values"].schema(), "default": field.default}
        else:
            keywords = {"type": "boolean", "default": field.default}
        properties[field.name] = {**keywords, "description": spec["help"]}
    return properties


def job_settings(training: dict, variant: Variant, given=()) -> dict:
    """The options a study hands one training job: its ``training`` settings (with the
    dataset's own) for a ``variant``'s bits, schedule, boundary rate, parallelism, mini-batch
    settings and label propagation, keeping only the options such a job reads, so that a
    change of an option no job of a variant reads (an adaptive run's lambda, the label draw)
    reruns no job of it.

    Args:
        training: the study's training settings, with the dataset's own.
        variant: the variant (its model is ``training``'s ``model``).
        given: the options the user set; the model's own defaults replace the others
            (:func:`with_model_defaults`).

    Returns:
        Option name -> value for the options the job reads.
    """
    minibatch = {} if variant.minibatch is None else dataclasses.asdict(variant.minibatch)
    values = with_model_defaults({**training, "bits": variant.bits, "schedule": variant.schedule,
                                  "boundary_rate": variant.boundary_rate, "parallelism": variant.parallelism,
                                  **minibatch}, given)
    if not variant.label_propagation:
        values["label_rate"] = 0.0
    return {field.name: values[field.name] for field, spec in declared(TrainConfig)
            if field.name in values and is_read(spec, values)}


def default(name: str):
    """The default of one :class:`TrainConfig` field.

    Args:
        name: the field's name.

    Returns:
        Its declared default.
    """
    return TrainConfig.__dataclass_fields__[name].default
