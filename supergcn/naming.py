"""Names shared by the command line, the package, the Snakemake workflow and its config schema.

Standard library only: the Snakefile imports this module while it parses, and parsing
must not pay for torch, numba or pandas. Each list is defined here once; the schema's
enums are held equal to these by ``tests/test_naming.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from decimal import Decimal
from pathlib import Path

#: How cut edges are served (:mod:`supergcn.plan.builder`).
STRATEGIES = ("pre", "post", "hybrid")
#: Bits per exchanged value and the name of that precision in paths and tables.
PRECISIONS = {32: "fp32", 8: "int8", 4: "int4", 2: "int2"}
#: Quantized widths (every precision but float32).
QUANTIZED_BITS = tuple(bits for bits in PRECISIONS if bits != 32)
#: ``bits`` of the variants whose bit widths AdaQP's solver assigns per message group.
ADAPTIVE = "adaptive"
#: AdaQP's defaults for them: lambda (variance against time; AdaQP's configs use 0.5),
#: rows per message group (AdaQP: 100 to 2,000 by dataset), epochs between assignments
#: (the best of AdaQP's sensitivity study).
ADAPTIVE_WEIGHT, ADAPTIVE_GROUP_SIZE, ADAPTIVE_PERIOD = 0.5, 100, 50
#: Everything ``bits`` may be.
BIT_CHOICES = (*PRECISIONS, ADAPTIVE)
#: Exchange schedules while training: every epoch, DistGNN's delayed remote partial
#: aggregates ``cd-<r>`` (:mod:`supergcn.methods.distgnn`; cd-0 is synchronous) or never,
#: or PipeGCN's exchange one epoch stale (:mod:`supergcn.methods.pipegcn`).
SYNCHRONOUS = "sync"
NO_COMMUNICATION = "0c"
#: A DistGNN schedule (one spelling per delay: no leading zeros).
DELAYED_PATTERN = rf"{NO_COMMUNICATION}|cd-(?:0|[1-9][0-9]*)"
#: PipeGCN's schedules and the names its paper gives them: rows and gradients one epoch
#: stale, with the received features (f), gradients (g) or both smoothed by a moving average.
PIPELINED_SCHEDULES = {"pipe": "PipeGCN", "pipe-f": "PipeGCN-F", "pipe-g": "PipeGCN-G", "pipe-fg": "PipeGCN-GF"}
PIPELINED_PATTERN = "|".join(sorted(PIPELINED_SCHEDULES, key=len, reverse=True))
#: Any schedule.
SCHEDULE_PATTERN = rf"{SYNCHRONOUS}|{DELAYED_PATTERN}|{PIPELINED_PATTERN}"
#: BNS-GCN's share of boundary rows sampled each epoch, as a variant's name spells it
#: (``bns0.1``; 1, every row, is the plain exchange and has no suffix).
BOUNDARY_RATE_PATTERN = r"0|0\.[0-9]*[1-9]"
#: How label propagation picks each epoch's label inputs: exactly the rate's share of the
#: training nodes, or each node independently with that probability (upstream's draw).
LABEL_DRAWS = ("exact", "bernoulli")
#: Rounding of quantized rows: nearest (upstream SuperGCN) or stochastic (AdaQP, unbiased).
ROUNDINGS = ("nearest", "stochastic")
#: Wire types of the per-row quantization parameters (zero point, scale) and their bytes.
PARAMETER_DTYPES = {"bfloat16": 2, "float32": 4}
#: The parameters' wire type unless told otherwise: bfloat16, as upstream and AdaQP.
DEFAULT_PARAMETER_DTYPE = "bfloat16"
#: The GNN model options and variant names mean unless told otherwise.
DEFAULT_MODEL = "sage"


def _model_homes() -> tuple[str, ...]:
    # The directories of supergcn/models/ that are packages, listed without importing any.
    homes = sorted(path.parent.name for path in (Path(__file__).parent / "models").glob("*/__init__.py"))
    return (DEFAULT_MODEL, *(name for name in homes if name != DEFAULT_MODEL))


#: GNN architectures: one home each in :mod:`supergcn.models`, the default first.
GNN_MODELS = _model_homes()
#: Types the linear layers' GEMMs may run in (bfloat16: CPUs with bf16 matrix units).
DENSE_DTYPES = ("float32", "bfloat16")
#: Sparse-product back ends: the numba gathers, or torch.sparse.mm as the reference.
KERNELS = ("numba", "torch")
#: How a run divides the work: by graph partition (each rank aggregates its part's rows and
#: exchanges their boundary, SuperGCN and its baselines) or MixGCN's mixture of parallelism
#: (``mop``: each rank aggregates a slice of the feature columns of every row over the
#: replicated adjacency and updates its part's rows, :mod:`supergcn.methods.mixgcn`).
PARTITION_PARALLELISM, MIXTURE_OF_PARALLELISM = "partition", "mop"
PARALLELISMS = (PARTITION_PARALLELISM, MIXTURE_OF_PARALLELISM)
#: The paper's name of a float32 GraphSAGE run of the mixture of parallelism (any strategy:
#: the mixture reads the plan's rows, not how it serves cut edges).
MIXGCN = "MixGCN"
#: DistGNN-MB's mini-batch settings beside the batch size (:class:`MiniBatch`, the defaults of
#: ``supergcn train``'s options of that group), its paper's (§4.4): neighbours drawn per layer,
#: the input layer's first, lines of each layer's historical embedding cache (cs), rows pushed
#: to each peer per layer and step (nc), steps a line lives (ls) and steps after which a push
#: is stored (d).
DEFAULT_FANOUTS, HEC_SIZE, HEC_PUSH, HEC_LIFE, HEC_DELAY = "5,10,15", 1_000_000, 2000, 2, 1
#: Fan-outs as a study writes them: counts of at least 1, or -1 for every neighbour, comma-separated.
FANOUTS_PATTERN = r"(?:-1|[1-9][0-9]*)(?:,(?:-1|[1-9][0-9]*))*"
#: The paper's name of a float32 mini-batch run (any strategy: it samples its part of the
#: graph, the plan serves only the exact full-graph evaluation).
DISTGNN_MB = "DistGNN-MB"
_COUNT, _FANOUT_WORD = "[1-9][0-9]*", "(?:all|[1-9][0-9]*)"
#: A mini-batch variant's suffix (:attr:`MiniBatch.suffix`): ``-mb<B>``, then each setting
#: that differs from its default, in the options' order: ``-fan<f1>_<f2>..`` (``all`` for
#: -1), ``-hec<lines>``, ``-push<nc>``, ``-life<steps>``, ``-delay<steps>``, ``-flush``.
MINIBATCH_PATTERN = (rf"-mb({_COUNT})(?:-fan({_FANOUT_WORD}(?:_{_FANOUT_WORD})*))?(?:-hec({_COUNT}))?"
                     rf"(?:-push(0|{_COUNT}))?(?:-life(0|{_COUNT}))?(?:-delay({_COUNT}))?(-flush)?")
#: Vertex weights a partition balances (:mod:`supergcn.partition.partition`).
PARTITION_CONSTRAINTS = ("nodes", "in_degree", "train")
#: Partitioners (:mod:`supergcn.partition.metis`, :mod:`supergcn.partition.kaminpar`), and MixGCN's
#: equal row ranges of the reverse Cuthill-McKee order (:mod:`supergcn.partition.rcm`).
PARTITION_ENGINES = ("metis", "kaminpar", "rcm")
#: Masked label propagation on / off, as it appears in variant names.
LABEL_PROPAGATION = {True: "lp", False: "nolp"}
#: A variant's label: strategy-precision-lp[-schedule][-bns<rate>][-model][-mop][-mb<B>...]
#: (:class:`Variant`; the model only where it is not GraphSAGE, the default; the parallelism
#: only where it is not by partition; the mini-batch settings only for mini-batch training).
VARIANT_PATTERN = (f"({'|'.join(STRATEGIES)})-({'|'.join([*PRECISIONS.values(), ADAPTIVE])})-"
                   f"({'|'.join(LABEL_PROPAGATION.values())})(?:-({DELAYED_PATTERN}|{PIPELINED_PATTERN}))?"
                   f"(?:-bns({BOUNDARY_RATE_PATTERN}))?"
                   f"(?:-({'|'.join(m for m in GNN_MODELS if m != DEFAULT_MODEL)}))?"
                   f"(?:-({'|'.join(p for p in PARALLELISMS if p != PARTITION_PARALLELISM)}))?"
                   f"(?:{MINIBATCH_PATTERN})?")
#: What preparation does with self loops: keep them (once, the default) or drop them
#: (upstream SuperGCN's preprocessing).
KEEP_SELF_LOOPS, DROP_SELF_LOOPS = "keep", "drop"
SELF_LOOPS = (KEEP_SELF_LOOPS, DROP_SELF_LOOPS)
#: A dataset's name as the workflow's paths take it: a built-in one's, and the names a study
#: gives graphs of its own (``own_datasets``, :mod:`supergcn.data.own_files`).
DATASET_NAME = r"[A-Za-z0-9_\-]+"
#: Config keys that were renamed: old -> new.
RENAMED_CONFIG_KEYS = {"model": "perf"}

#: The study's result tables, in the order ``supergcn tables`` writes them (each as CSV,
#: Markdown and LaTeX: :func:`supergcn.report.tables.write_table`). The workflow's rules,
#: the commands and the tests take the names from here.
TABLES = ("runs", "scaling", "breakdown", "accuracy", "time_to_accuracy", "volume", "preprocessing")
#: Tables written only when given their inputs: ``volume`` the plans, ``preprocessing`` the
#: step directories (the workflow always gives both).
OPTIONAL_TABLES = ("volume", "preprocessing")
#: The tables of the plan-only performance-model study (:mod:`supergcn.perf.study`), in order;
#: ``perf_validation`` only where benchmark results are given.
PERF_TABLES = ("perf_hybrid", "perf_predictions", "perf_regime", "perf_crossover", "perf_cost", "perf_methods",
               "perf_validation")
#: The performance-model study's figures (PNG and PDF, :func:`supergcn.report.figures.plot_perf_study`).
PERF_FIGURES = ("perf_comm_scaling", "perf_models", "perf_cost")


@dataclass(frozen=True)
class Figure:
    """A figure of the study: the ``table`` of :data:`TABLES` it is drawn from, and the
    ``section`` of Snakemake's HTML report that shows it."""

    table: str
    section: str


#: The study's figures (``supergcn figures``; PNG and PDF each), in the order they are drawn.
FIGURES = {"scaling": Figure("scaling", "Scaling"), "breakdown": Figure("breakdown", "Scaling"),
           "accuracy_curves": Figure("runs", "Accuracy"), "volume": Figure("volume", "Communication")}


def precision_name(bits: int | str) -> str:
    """``fp32``, ``int8``, ``int4``, ``int2`` or ``adaptive`` for 32, 8, 4, 2 or ``adaptive`` bits."""
    return ADAPTIVE if bits == ADAPTIVE else PRECISIONS[bits]


def precision_bits(name: str) -> int | str:
    """The inverse of :func:`precision_name`."""
    return ADAPTIVE if name == ADAPTIVE else {value: bits for bits, value in PRECISIONS.items()}[name]


def check_schedule(schedule: str) -> str:
    """``schedule`` if it is one (:data:`SCHEDULE_PATTERN`), else a ValueError naming those there are."""
    if not re.fullmatch(SCHEDULE_PATTERN, schedule):
        raise ValueError(f"unknown exchange schedule {schedule!r}: use sync, 0c, cd-<r> with r >= 0 (e.g. cd-5) "
                         f"or one of {', '.join(PIPELINED_SCHEDULES)}")
    return schedule


def is_pipelined(schedule: str) -> bool:
    """Whether ``schedule`` is one of PipeGCN's (:data:`PIPELINED_SCHEDULES`)."""
    return schedule in PIPELINED_SCHEDULES


def schedule_delay(schedule: str) -> int | None:
    """DistGNN's delay r of a ``cd-<r>`` schedule, 0 for ``sync`` and PipeGCN's (no DistGNN
    delay), None for ``0c`` (never)."""
    check_schedule(schedule)
    if is_pipelined(schedule):
        return 0
    if schedule == NO_COMMUNICATION:
        return None
    return 0 if schedule == SYNCHRONOUS else int(schedule[len("cd-"):])


#: How a variant's name spells a mini-batch setting that differs from its default
#: (:data:`MINIBATCH_PATTERN`), and how a name's word is read back.
_SUFFIX_WORDS = {
    "fanouts": ("fan", lambda value: "_".join("all" if int(c) == -1 else str(int(c)) for c in value.split(",")),
                lambda word: word.replace("all", "-1").replace("_", ",")),
    "hec_size": ("hec", str, int), "hec_push": ("push", str, int), "hec_life": ("life", str, int),
    "hec_delay": ("delay", str, int), "hec_flush": ("flush", lambda value: "", bool),
}


@dataclass(frozen=True)
class MiniBatch:
    """DistGNN-MB's settings of a mini-batch variant: ``supergcn train``'s options of that
    group (:class:`~supergcn.train.config.TrainConfig`, whose defaults these are), the seed
    nodes per mini-batch on each rank, the fan-outs and the historical embedding cache's
    lines, push, life, delay and flush (:mod:`supergcn.methods.distgnn_mb`)."""

    batch_size: int
    fanouts: str = DEFAULT_FANOUTS
    hec_size: int = HEC_SIZE
    hec_push: int = HEC_PUSH
    hec_life: int = HEC_LIFE
    hec_delay: int = HEC_DELAY
    hec_flush: bool = False

    def changed(self) -> dict:
        """The settings besides the batch size that differ from their defaults.

        Returns:
            Option name -> value, in the options' order.
        """
        defaults = MiniBatch(self.batch_size)
        return {field.name: getattr(self, field.name) for field in fields(self)[1:]
                if getattr(self, field.name) != getattr(defaults, field.name)}

    def words(self) -> list[str]:
        """The changed settings as a variant's name spells them: ``push0``, ``fan10_all``, ``flush``.

        Returns:
            One word per changed setting, in the options' order.
        """
        return [prefix + spell(value) for name, value in self.changed().items()
                for prefix, spell, _ in [_SUFFIX_WORDS[name]]]

    @property
    def suffix(self) -> str:
        """The variant name's suffix (:data:`MINIBATCH_PATTERN`): ``-mb1000``, ``-mb64-push0``."""
        return "".join(f"-{word}" for word in [f"mb{self.batch_size}", *self.words()])

    @classmethod
    def from_groups(cls, groups) -> "MiniBatch | None":
        """The settings a variant's name spells, from the groups of :data:`MINIBATCH_PATTERN`.

        Args:
            groups: the batch size, then each setting's text (None where the name leaves it out).

        Returns:
            The settings; None where the name has no ``-mb<B>``.
        """
        batch, *texts = groups
        if batch is None:
            return None
        given = {name: read(text) for (name, (_, _, read)), text in zip(_SUFFIX_WORDS.items(), texts)
                 if text is not None}
        return cls(int(batch), **given)

    @classmethod
    def from_options(cls, options: dict) -> "MiniBatch | None":
        """The settings of a run with ``options`` (a metrics header's ``config``), fan-outs
        spelled as a study writes them.

        Args:
            options: option name -> value, every option of ``supergcn train``.

        Returns:
            The settings; None where the run trains full batches (``batch_size`` 0 or absent).
        """
        if options.get("batch_size", 0) <= 0:
            return None
        given = {field.name: options[field.name] for field in fields(cls)}
        given["fanouts"] = ",".join(str(int(count)) for count in given["fanouts"].split(","))
        return cls(**given)


@dataclass(frozen=True)
class Variant:
    """A training variant of the study: how cut edges are served (``strategy``), the bits of
    exchanged rows (or ``adaptive``), label propagation, the exchange ``schedule``, BNS-GCN's
    ``boundary_rate`` (1: every boundary row), the GNN ``model``, the ``parallelism``
    (:data:`PARALLELISMS`: by partition, or MixGCN's mixture) and DistGNN-MB's ``minibatch``
    settings (None: full-batch training)."""

    strategy: str
    bits: int | str
    label_propagation: bool
    schedule: str = SYNCHRONOUS
    model: str = DEFAULT_MODEL
    boundary_rate: float = 1.0
    parallelism: str = PARTITION_PARALLELISM
    minibatch: MiniBatch | None = None

    @property
    def name(self) -> str:
        """The label in paths, tables and figures, e.g. ``hybrid-int2-lp``, ``pre-fp32-nolp-cd-5``,
        ``post-fp32-nolp-bns0.1``, ``hybrid-fp32-nolp-gat``, ``hybrid-fp32-nolp-mop`` or
        ``hybrid-fp32-nolp-mb1000``."""
        suffix = "" if self.schedule == SYNCHRONOUS else f"-{self.schedule}"
        suffix += "" if self.boundary_rate == 1 else f"-bns{rate_text(self.boundary_rate)}"
        suffix += "" if self.model == DEFAULT_MODEL else f"-{self.model}"
        suffix += "" if self.parallelism == PARTITION_PARALLELISM else f"-{self.parallelism}"
        suffix += "" if self.minibatch is None else self.minibatch.suffix
        return f"{self.strategy}-{precision_name(self.bits)}-{LABEL_PROPAGATION[bool(self.label_propagation)]}{suffix}"

    @classmethod
    def from_config(cls, entry: dict, model: str = DEFAULT_MODEL) -> "Variant":
        """The variant of one entry of the config's ``variants`` list; ``model`` is the
        study's (``training.model``), which the entry's own ``model`` overrides."""
        minibatch = None if entry.get("minibatch") is None else MiniBatch(**entry["minibatch"])
        return cls(entry["strategy"], entry["bits"], entry["label_propagation"], entry.get("schedule", SYNCHRONOUS),
                   entry.get("model", model), float(entry.get("boundary_rate", 1.0)),
                   entry.get("parallelism", PARTITION_PARALLELISM), minibatch)

    @classmethod
    def parse(cls, name: str) -> "Variant":
        """The inverse of :attr:`name`; a name that spells a mini-batch setting at its
        default is refused, so that one variant has one name."""
        match = re.fullmatch(VARIANT_PATTERN, name)
        if match is None:
            raise ValueError(f"{name!r} is not a variant name such as hybrid-int2-lp, pre-fp32-nolp-cd-5, "
                             "post-fp32-nolp-bns0.1, hybrid-fp32-nolp-gat, hybrid-fp32-nolp-mop or "
                             "hybrid-fp32-nolp-mb1000")
        strategy, precision, lp, schedule, rate, model, parallelism, *minibatch = match.groups()
        variant = cls(strategy, precision_bits(precision), lp == LABEL_PROPAGATION[True], schedule or SYNCHRONOUS,
                      model or DEFAULT_MODEL, 1.0 if rate is None else float(rate),
                      parallelism or PARTITION_PARALLELISM, MiniBatch.from_groups(minibatch))
        if variant.name != name:
            raise ValueError(f"{name!r} is variant {variant.name} spelled otherwise (a name leaves out each "
                             "mini-batch setting at its default)")
        return variant


def rate_text(rate: float) -> str:
    """A boundary rate as a variant's name spells it: positional, shortest, no trailing
    zeros (0.1 -> ``0.1``, 1e-3 -> ``0.001``, 0 -> ``0``)."""
    text = format(Decimal(repr(float(rate))), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


#: The variants the paper names (ICS '25 Fig. 12 and Table 3): its configurations without
#: and with the communication optimisations. DistGNN's, PipeGCN's, BNS-GCN's, MixGCN's and
#: DistGNN-MB's are named by :func:`display_name`.
PAPER_NAMES = {"post-fp32-nolp": "SuperGCN w/o comm optimizations",
               "hybrid-int2-lp": "SuperGCN w/ comm optimizations"}


def display_name(variant: str) -> str:
    """The paper's name of a variant where it has one, else its label: DistGNN's partial
    aggregates in float32 on any schedule but ``sync`` are "DistGNN (cd-5)", "DistGNN (0c)",
    ...; float32 post rows one epoch stale "PipeGCN" (its paper's -F, -G, -GF with
    smoothing), sampled "BNS-GCN (p = 0.1)"; the synchronous float32 mixture of parallelism
    of any strategy "MixGCN"; synchronous float32 mini-batches by partition without label
    inputs, of any strategy, "DistGNN-MB", with a model other than GraphSAGE and the settings
    that differ from their defaults as the label spells them ("DistGNN-MB (gat, push0)")."""
    parsed = Variant.parse(variant)
    float32_rows = (parsed.bits, parsed.label_propagation, parsed.model) == (32, False, DEFAULT_MODEL)
    if parsed.minibatch is not None:
        plain = (parsed.bits, parsed.label_propagation, parsed.schedule, parsed.boundary_rate,
                 parsed.parallelism) == (32, False, SYNCHRONOUS, 1, PARTITION_PARALLELISM)
        changed = [*([parsed.model] if parsed.model != DEFAULT_MODEL else []), *parsed.minibatch.words()]
        return (DISTGNN_MB + (f" ({', '.join(changed)})" if changed else "")) if plain else variant
    if parsed.parallelism == MIXTURE_OF_PARALLELISM:
        plain = float32_rows and (parsed.schedule, parsed.boundary_rate) == (SYNCHRONOUS, 1)
        return MIXGCN if plain else variant
    if float32_rows and parsed.strategy == "pre" and parsed.boundary_rate == 1 \
            and parsed.schedule != SYNCHRONOUS and not is_pipelined(parsed.schedule):
        return f"DistGNN ({parsed.schedule})"
    if float32_rows and parsed.strategy == "post" and parsed.boundary_rate == 1 and is_pipelined(parsed.schedule):
        return PIPELINED_SCHEDULES[parsed.schedule]
    if float32_rows and parsed.strategy == "post" and parsed.schedule == SYNCHRONOUS and parsed.boundary_rate < 1:
        return f"BNS-GCN (p = {rate_text(parsed.boundary_rate)})"
    return PAPER_NAMES.get(variant, variant)


def renamed_key_errors(config: dict) -> list[str]:
    """One message per renamed key still present in ``config``."""
    return [f"config key `{old}:` is now `{new}:` (the performance model study); rename it in your config file"
            for old, new in RENAMED_CONFIG_KEYS.items() if old in config]
