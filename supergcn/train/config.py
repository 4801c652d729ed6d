"""Everything one training run is asked to do, with the defaults of the paper's Table 2.

Every option is written once, as a field of :class:`TrainConfig` (:func:`supergcn.options.option`):
the general ones here, each compared method's own in its room's card
(:attr:`~supergcn.methods.card.MethodCard.options`, joined to these as fields of their own
group). The command line of ``supergcn train``, the ``training`` section of a study's
config schema (its keys, types, ranges and defaults), the settings file a study hands each
job and the checkpoint's trajectory fingerprint are derived from these declarations, and so
is what a run reads (:func:`option_read`): an option given to a run that does not read it is
refused (:mod:`supergcn.train.conflicts`). Standard library only: the Snakefile reads them
while it parses.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from supergcn.methods import added_values, method_cards, method_of
from supergcn.models import card
from supergcn.naming import (
    COMPUTE_PRECISIONS,
    DEFAULT_MODEL,
    DEFAULT_PARAMETER_DTYPE,
    DENSE_DTYPES,
    FLOAT_BITS,
    GNN_MODELS,
    KERNELS,
    LABEL_DRAWS,
    PARAMETER_DTYPES,
    PRECISIONS,
    ROUNDINGS,
    SYNCHRONOUS,
)
from supergcn.options import GROUPS, Range, declared, is_read, option, trajectory_keys

#: The share of training labels fed as inputs in the paper's label-propagation runs.
UPSTREAM_LABEL_RATE = 0.62

_AT_LEAST_1 = Range(int, 1)
_AT_LEAST_0 = Range(int, 0)
_SHARE = Range(float, 0, 1, high_open=True)
#: ``precompute_input``'s values: ``auto`` is on for the runs of a method whose published
#: scripts precompute layer 0 (BNS-GCN's, PipeGCN's).
PRECOMPUTE_CHOICES = ("auto", "on", "off")
#: ``rounding``'s values: ``auto`` is the run's compared method's rounding as published
#: (its card's), nearest for SuperGCN's own exchange (upstream's).
ROUNDING_CHOICES = ("auto", *ROUNDINGS)
#: Everything ``bits`` may be: a precision, or a word a method adds (AdaQP's ``adaptive``).
BIT_CHOICES = (*PRECISIONS, *(word for words, _ in added_values("bits") for word in words))
#: Every exchange schedule: the synchronous one, or one a method adds.
SCHEDULE_PATTERN = "|".join([SYNCHRONOUS, *(pattern for pattern, _ in added_values("schedule"))])
#: The command line's groups of training options, in the order ``--help`` lists them: the
#: general ones, then each method's.
TRAINING_GROUPS = {**GROUPS, **{method.name: method.options_title for method in method_cards() if method.options}}


def _own_defaults(name: str) -> str:
    """The help's note of the models with their own default of option ``name``."""
    own = [f"{card(model).title} {card(model).training_defaults[name]}" for model in GNN_MODELS
           if name in card(model).training_defaults]
    return f" (unless set: {', '.join(own)})" if own else ""


def _read_by_model(name: str):
    """``read_when`` of an option only some models read: those whose card lists it."""
    return lambda values: name in card(values["model"]).training_options


def _models_reading(name: str) -> str:
    return "--model " + " or ".join(model for model in GNN_MODELS if name in card(model).training_options)


def _quantized(values: dict) -> bool:
    """Whether rows travel quantized (8, 4 or 2 bits, or a method's widths; not float32 or
    bfloat16, which have no rounding mode or parameters)."""
    return values.get("bits", 32) not in FLOAT_BITS


def _precompute_read(values: dict) -> bool:
    """Whether ``precompute_input`` matters: set, or ``auto`` in a run of a method whose
    published scripts precompute layer 0."""
    method = method_of(values)
    return values.get("precompute_input", "auto") != "auto" or (method is not None and method.precompute == "published")


def _aggregate_first_read(values: dict) -> bool:
    """Whether ``aggregate_first`` matters: not for a model that always projects first (GAT),
    nor for a method whose layers always aggregate first (PipeGCN's, MixGCN's)."""
    method = method_of(values)
    return (not card(values.get("model", DEFAULT_MODEL)).always_projects_first
            and not (method is not None and method.aggregates_first))


def _not_ignored(name: str):
    """``read_when`` of a general option a method's runs may ignore (its card's ``ignores``)."""
    def read(values: dict) -> bool:
        method = method_of(values)
        return method is None or name not in method.ignores
    return read


def parse_bits(text: str) -> int | str:
    """Bits of exchanged values: a number, or a word a method adds (``adaptive``).

    Args:
        text: the command line's text.

    Returns:
        The word as is, else the number.

    Raises:
        ValueError: neither such a word nor an integer.
    """
    return text if text in BIT_CHOICES else int(text)


def parse_schedule(text: str) -> str:
    """An exchange schedule: sync, or one a method adds (:data:`SCHEDULE_PATTERN`).

    Args:
        text: the command line's text.

    Returns:
        ``text``, checked.

    Raises:
        argparse.ArgumentTypeError: no schedule of that form.
    """
    import argparse

    if not re.fullmatch(SCHEDULE_PATTERN, text):
        raise argparse.ArgumentTypeError(f"unknown exchange schedule {text!r}: use {SYNCHRONOUS} or "
                                         + " or ".join(meaning for _, meaning in added_values("schedule")))
    return text


@dataclass
class RunOptions:
    """The general options of a training run (:class:`TrainConfig` adds each method's).
    ``graph``, ``partition`` and ``plan`` are step output directories, ``out`` the metrics
    file (JSON lines) to write; every field is an option whose help says what it takes.
    ``fail_at_epoch`` and ``fail_rank`` make that rank fail at the start of that epoch, for
    the tests of the abort path."""

    graph: Path = option(None, "prepared graph directory", group="io", required=True)
    partition: Path = option(None, "partition directory of that graph", group="io", required=True)
    plan: Path = option(None, "plan directory of that partition", group="io", required=True)
    out: Path = option(None, "metrics file (JSON lines) to write", group="io", required=True)
    model: str = option(DEFAULT_MODEL, "GNN architecture", choices=GNN_MODELS, study=True, trajectory=True)
    heads: int = option(4, "GAT: attention heads (concatenated in hidden layers, so they divide the hidden width; "
                        "averaged in the last)", values=_AT_LEAST_1, study=True, trajectory=True,
                        read_when=_read_by_model("heads"), read_hint=_models_reading("heads"))
    attention_dropout: float = option(0.0, "GAT: dropout probability on the attention coefficients, in [0, 1)",
                                      values=_SHARE, study=True, trajectory=True,
                                      read_when=_read_by_model("attention_dropout"),
                                      read_hint=_models_reading("attention_dropout"))
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
        trajectory=True, read_when=lambda values: values["label_rate"] > 0, read_hint="--label-rate above 0")
    input_norm: bool = option(False, "LayerNorm on the input features before the first layer", study=True,
                              trajectory=True)
    precision: str = option(
        "fp32", "what the model computes in: fp32; bf16 (GEMMs in bfloat16 from float32 master weights, features "
        "and activations stored in bfloat16, aggregations reading bfloat16 rows and summing them in float32 in the "
        "fixed order; LayerNorm's statistics, the loss and the optimizer in float32); auto (bf16 where the CPU has "
        "AMX-BF16, with which bf16 was measured faster, and the model's bf16 accuracy held, fp32 elsewhere; the "
        "run's header says which and why)", choices=COMPUTE_PRECISIONS, study=True, trajectory=True)
    dense_dtype: str = option(
        "float32", "type the linear layers' GEMMs run in, the rest in float32; bfloat16 is about 3x faster where "
        "the CPU has AMX-BF16 (slower than float32 with AVX512_BF16 alone), at bf16 precision",
        choices=DENSE_DTYPES, study=True, trajectory=True, read_when=lambda values: values["precision"] == "fp32",
        read_hint="--precision fp32: under bf16 every GEMM runs in bfloat16")
    aggregate_first: bool = option(
        False, "aggregate before every linear layer, as upstream SuperGCN (exchanges input-width rows); by default "
        "a layer narrowing its width transforms first and exchanges fewer bytes", study=True, trajectory=True,
        read_when=_aggregate_first_read, read_hint="a model that may transform first (not GAT) and a method whose "
        "layers do not always aggregate first")
    threads: int = option(1, "torch and numba threads per rank", values=_AT_LEAST_1, group="execution")
    kernel: str = option("numba", "sparse kernels: numba (optimised, default) or torch (torch.sparse.mm "
                         "reference)", choices=KERNELS, group="execution", study=True, trajectory=True)
    memory_per_rank: int = option(
        0, "MiB each rank may use (a study hands execution.mem_mb_per_rank): a run of a method that holds more than "
        "its share (MixGCN's copy of the whole adjacency) whose holding does not fit, at its peak while built, is "
        "refused before any rank starts (0 = not checked)", values=_AT_LEAST_0, group="execution")
    bits: int | str = option(
        32, "; ".join(["32 = float32; 16 = bfloat16 rows (rounded to nearest even, upstream's --num_bits 16); "
                       "8, 4, 2 = per-row quantized embeddings and gradients",
                       *(meaning for _, meaning in added_values("bits"))]), values=parse_bits, choices=BIT_CHOICES,
        group="exchange", trajectory=True)
    rounding: str = option("auto", "quantization rounding: nearest (upstream SuperGCN), stochastic (unbiased), or "
                           "auto = the compared method's as published (" + ", ".join(
                               f"{method.title}: {method.rounding}" for method in method_cards()
                               if method.rounding != "nearest") + "), else nearest",
                           choices=ROUNDING_CHOICES, group="exchange", study=True, trajectory=True,
                           read_when=_quantized, read_hint="--bits 8, 4, 2 or a method's widths")
    overlap: bool = option(True, "overlap the exchange with the local aggregation", group="exchange", study=True,
                           trajectory=True, read_when=_not_ignored("overlap"),
                           read_hint="an exchange that overlaps its local work")
    schedule: str = option(
        SYNCHRONOUS, "; ".join([f"{SYNCHRONOUS} (every epoch)", *(meaning for _, meaning in added_values("schedule"))]),
        values=parse_schedule, pattern=SCHEDULE_PATTERN, group="exchange", trajectory=True)
    precompute_input: str = option(
        "auto", "layer 0's aggregation of the input features computed once before training, so layer 0 "
        "exchanges nothing (BNS-GCN's and PipeGCN's --use-pp): on, off, or auto = on for the runs of a method whose "
        "published scripts do it (" + ", ".join(method.title for method in method_cards()
                                                if method.precompute == "published")
        + ") where the input is the plain features", choices=PRECOMPUTE_CHOICES, group="exchange", study=True,
        trajectory=True, read_when=_precompute_read, read_hint="--precompute-input on or off, or a method that "
        "precomputes layer 0")
    parameter_dtype: str = option(DEFAULT_PARAMETER_DTYPE, "wire type of the per-row zero point and scale",
                                  choices=tuple(PARAMETER_DTYPES), group="exchange", study=True, trajectory=True,
                                  read_when=_quantized, read_hint="--bits 8, 4, 2 or a method's widths")
    checkpoint: Path | None = option(None, "checkpoint file (written atomically; when the run finishes, its "
                                     "metrics are kept beside it as <checkpoint>.finished.jsonl and the checkpoint "
                                     "is deleted)", group="execution")
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
        the trajectory (:func:`supergcn.options.trajectory_keys`), the input hashes and the
        layout of a checkpoint's rank state (:data:`RANK_STATE_FORMAT`).

        Args:
            hashes: the input hashes (graph, partition, plan) by name.

        Returns:
            24 hexadecimal digits.
        """
        payload = json.dumps({**{k: getattr(self, k) for k in trajectory_keys(self)}, **hashes,
                              "rank_state_format": RANK_STATE_FORMAT}, sort_keys=True)
        return hashlib.blake2b(payload.encode(), digest_size=12).hexdigest()

    def conflicts(self) -> list[str]:
        """One message (with its fix) per value an option does not take, per combination of
        options that cannot run together and per option set where the run does not read it
        (:func:`supergcn.train.conflicts.run_conflicts`).

        Returns:
            The messages; empty when the run can go ahead.
        """
        from supergcn.train.conflicts import run_conflicts

        return run_conflicts(self)

    def values(self) -> dict:
        """Every option's value, by name.

        Returns:
            Option name -> value.
        """
        return dataclasses.asdict(self)

    @property
    def method(self):
        """The compared method the run is (its :class:`~supergcn.methods.card.MethodCard`), or
        None for SuperGCN's own exchange."""
        return method_of(self.values())

    @property
    def input_is_plain(self) -> bool:
        """Whether layer 0's input is the features themselves (no label inputs, no input norm)."""
        return self.label_rate == 0 and not self.input_norm

    @property
    def quantization_rounding(self) -> str:
        """How quantized rows are rounded (``rounding``; ``auto``: as the run's compared method
        was published, nearest for SuperGCN's own exchange, as upstream)."""
        if self.rounding != "auto":
            return self.rounding
        return "nearest" if self.method is None else self.method.rounding

    @property
    def precomputes_input(self) -> bool:
        """Whether layer 0's aggregation is computed once before training (``precompute_input``:
        on where asked, and by default in the runs of a method whose published scripts do,
        where the input is plain and the aggregation a sum of rows)."""
        if self.precompute_input == "auto":
            method = self.method
            published = method is not None and method.precompute == "published"
            return published and self.input_is_plain and card(self.model).linear_aggregation
        return self.precompute_input == "on"

    @property
    def layers_aggregate_first(self) -> bool:
        """Whether every layer aggregates before it transforms: ``aggregate_first``, or a
        method whose layers do (PipeGCN's stale rows are a layer's input, not input times
        stale weights; MixGCN's Alg. 2)."""
        method = self.method
        return self.aggregate_first or (method is not None and method.aggregates_first)

    @property
    def fanout_counts(self) -> list[int]:
        """``fanouts`` as counts, the input layer's first (a mini-batch run's)."""
        return [int(part) for part in self.fanouts.split(",")]

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


#: The layout of a checkpoint's rank state (the trainer's :meth:`~supergcn.train.trainer.Trainer.rank_state`),
#: in the trajectory fingerprint: a checkpoint of another layout is refused as another run's.
RANK_STATE_FORMAT = 2

#: One training run: the general options (:class:`RunOptions`) and each method's own, in its group.
TrainConfig = dataclasses.make_dataclass(
    "TrainConfig", [option for method in method_cards() for option in method.options], bases=(RunOptions,),
    namespace={"__module__": __name__,
               "__doc__": RunOptions.__doc__.replace("(:class:`TrainConfig` adds each method's)",
                                                     "and every compared method's own (its card's options)")})


def option_read(name: str, values: dict) -> bool:
    """Whether option ``name`` is read by a run of ``values`` (its declaration's ``read_when``,
    which for a method's options is whether the run is that method's).

    Args:
        name: a field of :class:`TrainConfig`.
        values: every option's value, by name.

    Returns:
        Whether the run reads it.
    """
    return is_read(TrainConfig.__dataclass_fields__[name].metadata["option"], values)


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


def job_settings(training: dict, variant, given=()) -> dict:
    """The options a study hands one training job: its ``training`` settings (with the
    dataset's own) for a ``variant``'s bits, model, method and label propagation, keeping
    only the options such a job reads, so that a change of an option no job of a variant
    reads (an adaptive run's lambda, the label draw) reruns no job of it.

    Args:
        training: the study's training settings, with the dataset's own.
        variant: the :class:`~supergcn.variants.Variant` (its model is ``training``'s ``model``).
        given: the options the user set; the model's own defaults replace the others
            (:func:`with_model_defaults`).

    Returns:
        Option name -> value for the options the job reads.
    """
    method_options = {name: value for name, value in variant.options().items() if name != "model"}
    values = with_model_defaults({**training, **method_options}, given)
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
