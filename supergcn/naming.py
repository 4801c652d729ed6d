"""Names shared by the command line, the package, the Snakemake workflow and its config schema.

Standard library only: the Snakefile imports this module while it parses, and parsing
must not pay for torch, numba or pandas. Each list is defined here once; the schema's
enums are held equal to these by ``tests/test_naming.py``. What a compared method names
is its card's (:mod:`supergcn.methods`), and a study's variants are :mod:`supergcn.variants`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: How cut edges are served (:mod:`supergcn.plan.builder`).
STRATEGIES = ("pre", "post", "hybrid")
#: Bits per exchanged value and the name of that precision in paths and tables.
PRECISIONS = {32: "fp32", 16: "bf16", 8: "int8", 4: "int4", 2: "int2"}
#: Widths whose rows travel as floating point numbers, each value on its own: float32, and
#: bfloat16 (upstream SuperGCN's ``--num_bits 16``: float32 rounded to nearest even, NaN and
#: infinities as they are; :mod:`supergcn.kernels.wire`).
FLOAT_BITS = (32, 16)
#: Quantized widths: integers of a row's range, with a (zero point, scale) per row.
QUANTIZED_BITS = tuple(bits for bits in PRECISIONS if bits not in FLOAT_BITS)
#: The widths narrower than float32, which the performance model predicts beside it.
NARROWER_BITS = tuple(bits for bits in PRECISIONS if bits != 32)
#: The exchange schedule of every run but a method's (:mod:`supergcn.methods`: DistGNN's
#: delayed aggregates, PipeGCN's stale rows): every epoch.
SYNCHRONOUS = "sync"
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
#: What a run computes in (:mod:`supergcn.train.precision`): float32, bfloat16 rows
#: summed in float32, or whichever of the two this CPU and model earn.
COMPUTE_PRECISIONS = ("fp32", "bf16", "auto")
#: Sparse-product back ends: the numba gathers, or torch.sparse.mm as the reference.
KERNELS = ("numba", "torch")
#: Vertex weights a partition balances (:mod:`supergcn.partition.partition`).
PARTITION_CONSTRAINTS = ("nodes", "in_degree", "train")
#: Partitioners (:mod:`supergcn.partition.metis`, :mod:`supergcn.partition.kaminpar`), and MixGCN's
#: equal row ranges of the reverse Cuthill-McKee order (:mod:`supergcn.partition.rcm`).
PARTITION_ENGINES = ("metis", "kaminpar", "rcm")
#: Masked label propagation on / off, as it appears in variant names.
LABEL_PROPAGATION = {True: "lp", False: "nolp"}
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
#: Markdown and LaTeX: :func:`supergcn.report.table_files.write_table`). The workflow's rules,
#: the commands and the tests take the names from here.
TABLES = ("runs", "scaling", "breakdown", "accuracy", "time_to_accuracy", "volume", "preprocessing")
#: Tables written only when given their inputs: ``volume`` the plans, ``preprocessing`` the
#: step directories (the workflow always gives both).
OPTIONAL_TABLES = ("volume", "preprocessing")
#: The tables of the plan-only performance-model study (:mod:`supergcn.perf.study`), in order;
#: ``perf_validation`` only where benchmark results are given.
PERF_TABLES = ("perf_hybrid", "perf_predictions", "perf_regime", "perf_crossover", "perf_cost", "perf_methods",
               "perf_validation")
#: The performance-model study's figures (PNG and PDF, :func:`supergcn.report.perf_figures.plot_perf_study`).
PERF_FIGURES = ("perf_comm_scaling", "perf_models", "perf_cost")


@dataclass(frozen=True)
class Figure:
    """A figure of the study: the ``table`` of :data:`TABLES` it is drawn from, and the
    ``section`` of Snakemake's HTML report that shows it."""

    table: str
    section: str


#: The study's figures (``supergcn figures``; PNG and PDF each), in the order they are drawn.
FIGURES = {"scaling": Figure("scaling", "Scaling"), "breakdown": Figure("breakdown", "Scaling"),
           "accuracy_curves": Figure("runs", "Accuracy"), "volume": Figure("volume", "Communication"),
           "memory": Figure("scaling", "Memory")}


def precision_name(bits: int | str) -> str:
    """``fp32``, ``bf16``, ``int8``, ``int4`` or ``int2`` for 32, 16, 8, 4 or 2 bits; a word a method adds
    (AdaQP's ``adaptive``) as it is."""
    return PRECISIONS.get(bits, str(bits))


def precision_bits(name: str) -> int | str:
    """The inverse of :func:`precision_name`."""
    return {value: bits for bits, value in PRECISIONS.items()}.get(name, name)


def renamed_key_errors(config: dict) -> list[str]:
    """One message per renamed key still present in ``config``."""
    return [f"config key `{old}:` is now `{new}:` (the performance model study); rename it in your config file"
            for old, new in RENAMED_CONFIG_KEYS.items() if old in config]
