"""MixGCN's mixture of parallelism (MoP; Zhang et al., §3.1, Alg. 2): the aggregation split
by feature columns over a copy of the whole adjacency, the update by rows, two all-to-all
transposes a layer (``--parallelism mop``).

With m ranks, rank i owns the rows of its part (``n_i`` rows: the plan's owned nodes, one
contiguous range of the partition's numbering) and, for a d-wide layer input, the columns
``lo_i = ⌊d·i/m⌋ … hi_i − 1 = ⌊d·(i+1)/m⌋ − 1`` (``c_i`` of them). A layer's aggregation
``Y = diag(s) Â H`` of the row-split ``H`` (each rank's ``n_i × d`` rows) is

    row → column:  H[:, lo_i:hi_i] for all N rows        (rank j sends H_j[:, lo_i:hi_i] to i)
    aggregate:     Z_i = Â H[:, lo_i:hi_i]               (N × c_i, no communication)
    column → row:  Y_i = s_i ⊙ Z[rows of i, :]           (rank j sends Z_j[rows of i] to i)

so the sparse work ``nnz(Â)·c_i`` is balanced to within one column, and the dense update
that follows runs on the part's rows. Backward is the transpose: with G = dL/dY,
``dL/dH = Âᵀ diag(s) G`` through the same two transposes in reverse. Each transpose moves

    Σ_i Σ_{j≠i} n_i·c_j = N·d − Σ_i n_i·c_i   float32 values (≈ N·d·(1 − 1/m)),

constant in m (MixGCN's Prop. 3.4), where partition parallelism moves the cut's boundary
rows, which grow with m. As in Alg. 2 the input features are held in column slices from
the start (transposed once, at the first pass, where layer 0's input is the features), so
a training epoch of L layers of input widths d_0 … d_{L−1} moves

    forward:  column → row at every layer, row → column at layers 1 … L−1;
    backward: both at layers 1 … L−1 (layer 0's input needs no gradient),

that is ``Σ_l T(d_l) + 3·Σ_{l≥1} T(d_l)`` values with ``T(d) = N·d − Σ_i n_i·c_i(d)``
(:func:`~supergcn.methods.mixgcn.exchange.epoch_transpose_values`). The adjacency is
replicated: every rank holds all N rows (:func:`replicated_adjacency_bytes`; the graph is
symmetric, so they serve as their own transpose), which is what the method trades for its
constant volume; a run whose copy does not fit the memory a rank may use is refused.
MixGCN reorders nodes by reverse Cuthill–McKee and splits the order into equal ranges (the
``rcm`` partition engine); any partition's parts serve as row blocks, so both parallelisms
can be compared on one assignment.

MixGCN leaves out attention ("only element-wise reductions"): GAT is refused here too
(docs/methods.md says precisely why). One rank's aggregation: :mod:`supergcn.methods.mixgcn.exchange`.
"""

from __future__ import annotations

from supergcn.methods.card import MemoryTerms, MethodCard, PerformanceTerms, VariantNaming
from supergcn.naming import DEFAULT_MODEL
from supergcn.options import option

#: How a run divides the work: by graph partition (each rank aggregates its part's rows and
#: exchanges their boundary: SuperGCN and the other methods) or MixGCN's mixture of parallelism.
PARTITION_PARALLELISM, MIXTURE_OF_PARALLELISM = "partition", "mop"
PARALLELISMS = (PARTITION_PARALLELISM, MIXTURE_OF_PARALLELISM)
#: Bytes of an int64 row pointer or column index of MixGCN's replicated adjacency, and of the
#: float32 value per entry the torch kernels' CSR tensor keeps besides (the numba gathers keep none).
INDEX_BYTES, TORCH_VALUE_BYTES = 8, 4
#: Renumbering the copy (:mod:`supergcn.methods.mixgcn.exchange`) holds at most three int64 arrays of
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


OPTIONS = (
    ("parallelism", "str", option(
        PARTITION_PARALLELISM, "partition: each rank aggregates its part's rows and exchanges their boundary "
        "(SuperGCN and the other methods); mop: MixGCN's mixture of parallelism, each rank aggregates a slice of the "
        "feature columns of every node over a copy of the whole adjacency, and two all-to-all transposes a layer "
        "move the slices to the part's rows for the update and back (the plan's strategy is not used)",
        choices=PARALLELISMS, group="mixgcn", trajectory=True,
        read_when=lambda values: values.get("parallelism", PARTITION_PARALLELISM) != PARTITION_PARALLELISM)),
)


def _published(values: dict) -> bool:
    """MixGCN's runs: float32 column slices, GraphSAGE, no label inputs, any plan (the
    mixture reads the plan's rows, not how it serves cut edges)."""
    return values["bits"] == 32 and not values["label_propagation"] and values["model"] == DEFAULT_MODEL



CARD = MethodCard(
    name="mixgcn", title="MixGCN", option="parallelism",
    selects=lambda values: values.get("parallelism") == MIXTURE_OF_PARALLELISM,
    example={"parallelism": MIXTURE_OF_PARALLELISM},
    run_name=lambda values: "MixGCN", published=_published, runtime="exchange", options=OPTIONS,
    options_title="MixGCN's mixture of parallelism",
    naming=VariantNaming(key="parallelism", suffix=lambda parallelism: f"-{parallelism}",
                         pattern=f"-{MIXTURE_OF_PARALLELISM}", read=lambda suffix: suffix[1:], after_model=True),
    model_needs="linear_aggregation", precompute="refused", aggregates_first=True, ignores=("overlap",),
    header_key="mixture_of_parallelism",
    memory=MemoryTerms("a copy of the whole adjacency", replicated_adjacency_bytes, replication_peak_bytes),
    performance=PerformanceTerms("mixgcn", "transposes"))
