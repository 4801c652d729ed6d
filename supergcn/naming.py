"""Names shared by the command line, the package, the Snakemake workflow and its config schema.

Standard library only: the Snakefile imports this module while it parses, and parsing
must not pay for torch, numba or pandas. Each list is defined here once; the schema's
enums are held equal to these by ``tests/test_naming.py``.
"""

from __future__ import annotations

#: How cut edges are served (:mod:`supergcn.partition.plan`).
STRATEGIES = ("pre", "post", "hybrid")
#: Bits per exchanged value and the name of that precision in paths and tables.
PRECISIONS = {32: "fp32", 8: "int8", 4: "int4", 2: "int2"}
#: Quantized widths (every precision but float32).
QUANTIZED_BITS = tuple(bits for bits in PRECISIONS if bits != 32)
#: Rounding of quantized rows: nearest (upstream SuperGCN) or stochastic (AdaQP, unbiased).
ROUNDINGS = ("nearest", "stochastic")
#: Wire types of the per-row quantization parameters (zero point, scale) and their bytes.
PARAMETER_DTYPES = {"bfloat16": 2, "float32": 4}
#: The parameters' wire type unless told otherwise: bfloat16, as upstream and AdaQP.
DEFAULT_PARAMETER_DTYPE = "bfloat16"
#: GNN architectures (:mod:`supergcn.train.gnn`).
GNN_MODELS = ("sage", "gcn")
#: Types the linear layers' GEMMs may run in (bfloat16: CPUs with bf16 matrix units).
DENSE_DTYPES = ("float32", "bfloat16")
#: Sparse-product back ends: the numba gathers, or torch.sparse.mm as the reference.
KERNELS = ("numba", "torch")
#: Vertex weights METIS can balance (:mod:`supergcn.partition.metis`).
PARTITION_CONSTRAINTS = ("nodes", "in_degree", "train")
#: Masked label propagation on / off, as it appears in variant names.
LABEL_PROPAGATION = {True: "lp", False: "nolp"}
#: Config keys that were renamed: old -> new.
RENAMED_CONFIG_KEYS = {"model": "perf"}


def precision_name(bits: int) -> str:
    """``fp32``, ``int8``, ``int4`` or ``int2`` for 32, 8, 4 or 2 bits."""
    return PRECISIONS[bits]


def precision_bits(name: str) -> int:
    """The inverse of :func:`precision_name`."""
    return {value: bits for bits, value in PRECISIONS.items()}[name]


def variant_name(strategy: str, bits: int, label_propagation: bool) -> str:
    """The label of a training variant in paths, tables and figures, e.g. ``hybrid-int2-lp``."""
    return f"{strategy}-{precision_name(bits)}-{LABEL_PROPAGATION[bool(label_propagation)]}"


#: The variants the paper names (ICS '25 Fig. 12 and Table 3): its configurations without
#: and with the communication optimisations.
PAPER_NAMES = {"post-fp32-nolp": "SuperGCN w/o comm optimizations",
               "hybrid-int2-lp": "SuperGCN w/ comm optimizations"}


def display_name(variant: str) -> str:
    """The paper's name of a variant where it has one, else the variant's own label."""
    return PAPER_NAMES.get(variant, variant)


def renamed_key_errors(config: dict) -> list[str]:
    """One message per renamed key still present in ``config``."""
    return [f"config key `{old}:` is now `{new}:` (the performance model study); rename it in your config file"
            for old, new in RENAMED_CONFIG_KEYS.items() if old in config]
