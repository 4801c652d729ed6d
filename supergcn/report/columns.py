"""What every column of the result tables means, and in which unit: the glossary of the
tables ``supergcn tables`` writes (:mod:`supergcn.report.tables`, :data:`supergcn.naming.TABLES`)
and ``supergcn perf tables`` writes (:mod:`supergcn.perf.study`, :data:`supergcn.naming.PERF_TABLES`).

Each table's columns are declared here once, in the order the table writes them;
``docs/outputs.md`` renders them (the ``column-glossary`` directive of ``docs/conf.py``) and
``tests/report/test_columns.py`` builds every table and holds its columns to these, both
ways: no column without its entry, no entry without its column. A ``<...>`` in a name
stands for a part that varies (``speedup_vs_<variant>``).

Conventions of the measured tables: a run's *timed epochs* are all but the first epoch of
each of its processes (one-off costs: JIT loading, first allocations, first exchanges;
:func:`supergcn.train.metrics.timed_epochs`); an epoch's time is the training step of its
slowest rank (forward, backward, the barrier, the gradient all-reduce and the optimizer;
evaluation excluded); a row of several seeds is their mean unless said otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from supergcn.distributed.timing import DETAIL, PAPER_CATEGORIES


@dataclass(frozen=True)
class Column:
    """One column of a result table.

    Args:
        name: the column's header; ``<...>`` stands for a part that varies.
        unit: its unit (empty for names, labels and flags).
        meaning: what it holds, and how it is computed.
    """

    name: str
    unit: str
    meaning: str

    def matches(self, header: str) -> bool:
        """Whether ``header`` is this column (any text in place of a ``<...>`` part).

        Args:
            header: a column header of a written table.

        Returns:
            True where it is.
        """
        pattern = "".join(".+" if part.startswith("<") else re.escape(part)
                          for part in re.split(r"(<[^>]+>)", self.name) if part)
        return re.fullmatch(pattern, header) is not None


DATASET = Column("dataset", "", "The graph's name (its `meta.json`'s `name`).")
VARIANT = Column("variant", "", "The training variant: strategy-precision-lp/nolp[-schedule][-bns<rate>][-model]"
                 "[-mop][-mb<B>...] ({py:class}`supergcn.variants.Variant`; a mini-batch run's settings that differ "
                 "from their defaults follow its batch size, config/README.md's `variants.minibatch`).")
NAME = Column("name", "", "The paper's name of the variant where it has one (\"SuperGCN w/ comm optimizations\", "
              "\"DistGNN (cd-5)\", \"DistGNN-MB\", ...), else the variant.")
P = Column("P", "ranks", "MPI processes of the run, one partition each.")
MODEL = Column("model", "", "The GNN architecture (`sage`, `gat`, ...).")
MACHINE = Column("machine", "", "The machine profile the model predicts for (`perf.machines`; `local`: this machine, "
                 "measured).")
BITS = Column("bits", "bits", "Bits per exchanged value: 32 (FP32), 16 (bfloat16), 8, 4 or 2 (quantized; "
              "`adaptive`: AdaQP's solver assigns them per message group).")
STRATEGY = Column("strategy", "", "How cut edges are served: `pre` (the sources' owner sends partial aggregates), "
                  "`post` (it sends the source rows) or `hybrid` (each cut edge pre or post, as the plan's cover "
                  "picks to send fewest rows).")

#: The meaning of each phase of an epoch (:mod:`supergcn.distributed.timing`): the paper's
#: categories, then the phases its ``other`` sums.
PHASE_MEANINGS = {
    "aggregation": "the sparse aggregation kernels (and GCN's normalisation scalings)",
    "communication": "the boundary exchanges of the GNN layers (Alltoallv), forward and backward",
    "quantization": "quantizing and dequantizing exchanged rows",
    "synchronization": "the barrier after backward: waiting for slower ranks",
    "other": "the paper's \"other\": a subtotal, dense + elementwise + optimizer + remainder (the columns before it)",
    "dense": "the linear layers: GEMMs, bias, their weight and input gradients",
    "elementwise": "dropout, LayerNorm, ReLU, log-softmax, the loss, the label embedding, the input normalisation",
    "optimizer": "the gradient all-reduce and the Adam step",
    "remainder": "what the epoch's time leaves: autograd bookkeeping, Python, the label-propagation split",
}
#: Each phase's column in the runs and breakdown tables: the phases, then each paper category
#: that sums several of them, named a subtotal (``other_subtotal_seconds``).
PHASE_COLUMNS = {**{phase: f"{phase}_seconds" for phase in DETAIL},
                 **{category: f"{category}_subtotal_seconds" for category, parts in PAPER_CATEGORIES.items()
                    if parts != (category,)}}
_SLOWEST = "Seconds of the slowest rank (the one with the longest epoch) per timed epoch in"
PHASE_SECONDS = tuple(Column(column, "s", f"{_SLOWEST} {PHASE_MEANINGS[phase]}.")
                      for phase, column in PHASE_COLUMNS.items())

EPOCH_SECONDS = Column("epoch_seconds", "s", "Wall time of a training epoch, max over ranks, mean over the timed "
                       "epochs (the slowest rank's phases add up to it).")
OVERSUBSCRIBED = Column("oversubscribed", "", "True where a host ran more ranks x threads_per_rank than the CPUs its "
                        "ranks may run on (the union of their affinity masks): ranks shared cores, so the times do "
                        "not measure scaling. Empty: the metrics file predates that record.")
PEAK_MEMORY = Column("peak_memory_gib", "GiB", "The largest peak resident memory (the process's high-water mark, "
                     "`VmHWM`) of any rank over the run, loading included; 1 GiB = 2^30 B.")
BYTES_SENT = Column("bytes_sent_per_epoch", "B", "Bytes all ranks send in one epoch's boundary exchanges, summed "
                    "over ranks and counted once, at the sender: every layer's exchange forward and its gradient's "
                    "backward, all kinds of message (rows, quantization parameters, GAT's attention scalars); "
                    "the gradient all-reduce and evaluation excluded. Mean over the timed epochs.")
ASSIGNMENT = Column("assignment_seconds_per_epoch", "s", "Wall seconds of AdaQP's bit-width re-assignments "
                    "(adaptive variants; tracing and solver) summed over the run and divided by all its epochs; "
                    "outside epoch_seconds. 0 for fixed widths.")
REFETCH = Column("refetch_seconds", "s", "Of the slowest rank's communication_seconds, the part SAR's backward spent "
                 "fetching peers' rows and scores again (GAT under `--sar sar`: its epoch lines' "
                 "`sequential_aggregation.refetch_seconds`), per timed epoch; empty for every other run.")
_FRACTION = "fraction (0-1)"

RUNS = (
    DATASET, P, STRATEGY, BITS,
    Column("label_propagation", "", "Whether a share of the training labels is fed as inputs (`label_rate` > 0)."),
    Column("seed", "", "The run's random seed."),
    Column("threads_per_rank", "threads", "torch and numba threads of each rank."),
    OVERSUBSCRIBED,
    Column("epochs", "epochs", "Epochs trained (resumed ones included)."),
    EPOCH_SECONDS,
    Column("epoch_seconds_sd", "s", "The sample standard deviation of those epochs' times (empty with one timed "
           "epoch)."),
    Column("timed_epochs", "epochs", "The epochs epoch_seconds is the mean of: all but each process's first."),
    *PHASE_SECONDS, PEAK_MEMORY, BYTES_SENT, ASSIGNMENT, REFETCH,
    Column("test_acc_at_best_val", _FRACTION, "Test accuracy at the epoch of best validation accuracy (OGB "
           "protocol); empty without validation nodes."),
    Column("best_val_acc", _FRACTION, "The best validation accuracy of any epoch."),
    Column("test_acc_at_min_val_loss", _FRACTION, "Test accuracy at the epoch of lowest validation loss (upstream "
           "SuperGCN's model selection); empty without validation nodes."),
    Column("final_test_acc", _FRACTION, "Test accuracy after the last epoch."),
    Column("metrics", "", "The run's metrics file (its header holds the options and the input hashes)."),
    VARIANT, NAME,
    Column("minibatch_steps", "steps", "A mini-batch run's (DistGNN-MB's) steps per epoch, the same on every rank: "
           "ceil(training nodes / batch size) of the rank with the most; empty for full-batch runs."),
    Column("hit_rate_layer_<layer>", _FRACTION, "A mini-batch run's historical embedding cache at that layer (0: the "
           "input layer's, whose lines hold input features): the halo rows found in the cache over those looked up, "
           "all ranks and epochs together (a miss drops the row's edges from the batch); empty where none was looked "
           "up (P = 1) and for full-batch runs."),
)

SCALING = (
    DATASET, VARIANT, NAME, P,
    Column("epoch_seconds", "s", f"{EPOCH_SECONDS.meaning} Mean over seeds."),
    Column("epoch_seconds_sd", "s", "The sample standard deviation of every timed epoch of every seed's run together: "
           "the spread between the runs and within them (pooled; empty with one timed epoch in all)."),
    Column("runs", "runs", "Runs (seeds) of the row; 1: a single run, whose spread is its epochs' alone."),
    Column("oversubscribed", "", "True where any seed's run was oversubscribed (see the runs table), empty where "
           "none was but one's metrics file does not say."),
    Column("peak_memory_gib", "GiB", f"{PEAK_MEMORY.meaning} Max over seeds."),
    Column("bytes_sent_per_epoch", "B", f"{BYTES_SENT.meaning} Mean over seeds."),
    Column("assignment_seconds_per_epoch", "s", f"{ASSIGNMENT.meaning} Mean over seeds."),
    Column("speedup_base_P", "ranks", "The P speedup and efficiency are relative to: 1 where the variant has a "
           "P = 1 run of the dataset, else its smallest P (efficiency is then relative to that P's, which is not "
           "1 by measurement but by definition)."),
    Column("speedup", "x", "epoch_seconds at speedup_base_P / epoch_seconds."),
    Column("speedup_sd", "x", "Its spread from both times' to first order: speedup x sqrt((sd_base / base)^2 + "
           "(epoch_seconds_sd / epoch_seconds)^2); 0 at speedup_base_P itself."),
    Column("efficiency", "fraction", "speedup x speedup_base_P / P: 1 is perfect scaling from speedup_base_P."),
    Column("efficiency_sd", "fraction", "speedup_sd x speedup_base_P / P."),
    Column("speedup_vs_<variant>", "x", "With `--baseline` (config `speedup_baseline`): that variant's "
           "epoch_seconds at the same dataset and P / this row's (the lines of the paper's Fig. 9); empty where it "
           "has no run at that P."),
    Column("speedup_vs_<variant>_sd", "x", "Its spread, as speedup_sd's."),
)

BREAKDOWN = (DATASET, VARIANT, NAME, P,
             *(Column(c.name, c.unit, f"{c.meaning} Mean over seeds.") for c in PHASE_SECONDS),
             Column(REFETCH.name, REFETCH.unit, f"{REFETCH.meaning} Mean over seeds."),
             Column("epoch_seconds", "s", f"{EPOCH_SECONDS.meaning} Mean over seeds."))


def _accuracy(stem: str, selection: str) -> tuple[Column, Column, Column]:
    """The mean, std and text columns of the test accuracy at one model selection's epoch."""
    return (Column(f"{stem}_mean", "%", f"Test accuracy at {selection}, mean over the seeds that have one."),
            Column(f"{stem}_std", "%", "Its sample standard deviation over seeds (0 with one seed)."),
            Column(stem, "%", f"{stem}_mean and {stem}_std as text, `mean ± std`; `n/a` where no run had "
                   "validation nodes."))


_AT_BEST_VAL = _accuracy("test_acc", "the epoch of best validation accuracy (OGB protocol)")
ACCURACY = (DATASET, VARIANT, NAME, P, *_AT_BEST_VAL[:2], Column("seeds", "runs", "Runs (seeds) of the row."),
            _AT_BEST_VAL[2], *_accuracy("val_loss_test_acc", "the epoch of lowest validation loss (upstream "
                                        "SuperGCN's model selection)"))

TIME_TO_ACCURACY = (
    DATASET, VARIANT, NAME, P,
    Column("split", "", "The accuracy followed: `val` or `test`."),
    Column("target", "", "The target as given: `90 %` (absolute) or `0.95 x best` (a share of the best accuracy "
           "any run of the dataset reaches on the split in any epoch); and, on the test split of a variant with "
           "P = 1 runs, `P = 1 final - 1 pt`: 1 point below the mean final test accuracy of the dataset and "
           "variant's P = 1 runs, DistGNN-MB's convergence criterion (its §4.5), at every P."),
    Column("target_acc", "%", "The accuracy the target stands for."),
    Column("reached", "runs", "`k/n`: k of the row's n runs (seeds) reach the target."),
    Column("epoch_mean", "epochs", "The first epoch at which a run's accuracy is at least target_acc, mean over the "
           "runs that reach it; empty where none does."),
    Column("seconds_mean", "s", "Training seconds until the end of that epoch: its and every earlier epoch's time "
           "(max over ranks, the first epoch included, evaluation excluded), mean over the runs that reach it."),
    Column("seconds_std", "s", "Their sample standard deviation (0 where one run reaches it)."),
)

_LAYER = "Bytes one layer's exchange sends (one direction, all ranks, width hidden)"
VOLUME = (
    DATASET, P,
    Column("hidden", "features", "The width the bytes are counted at: the dataset's hidden width."),
    Column("pre_bytes", "B", f"{_LAYER} if every cut edge is served pre, in FP32 (4 B a value)."),
    Column("post_bytes", "B", f"{_LAYER} if every cut edge is served post, in FP32."),
    Column("hybrid_bytes", "B", f"{_LAYER} under the hybrid plan's cover, in FP32."),
    Column("hybrid_int2_data_bytes", "B", "The hybrid rows in Int2: 2 bits a value, each destination's chunk "
           "padded to whole bytes (4 rows share a byte column)."),
    Column("hybrid_int2_param_bytes", "B", "Their quantization parameters: a zero point and a scale per row, "
           "bfloat16 (4 B a row)."),
    Column("hybrid_int2_bytes", "B", "What an Int2 exchange sends: data + parameters."),
    Column("hybrid_reduction", "x", "min(pre_bytes, post_bytes) / hybrid_bytes."),
    Column("int2_reduction", "x", "hybrid_bytes / hybrid_int2_bytes: FP32 over Int2, the parameters counted "
           "(16F / (F + 16) without padding: 15.06 at F = 256)."),
)

PREPROCESSING = (
    DATASET,
    Column("P", "ranks", "The partition's parts; empty for `prepare`."),
    Column("step", "", "`prepare`, `partition (<engine>)` or `plan (<strategy>)`."),
    Column("seconds", "s", "The seconds of the step's own work its manifest records."),
    Column("adjacency_entries", "entries", "The graph's directed adjacency (CSR) entries, E."),
    Column("peak_gib", "GiB", "Peak resident memory of the step's process (`VmHWM`)."),
    Column("bytes_per_entry", "B", "That peak per adjacency entry, from 50 M entries on "
           "(supergcn.report.step_tables.ENTRIES_FOR_BYTES_PER_ENTRY); empty below, where the interpreter's own "
           "0.3-0.5 GiB is most of the peak."),
    Column("edge_cut", "edges", "Partitions: undirected edges whose ends lie in different parts."),
    Column("imbalance_<constraint>", "ratio", "Partitions: max over parts / mean over parts of the nodes, edges "
           "(in-degrees) or training nodes (1 = perfect balance)."),
)

_PREDICTED = "Predicted by the model at the bottleneck rank, for one hidden layer's forward exchange:"
_HIDDEN = Column("hidden", "features", "The hidden width the graph is predicted at: its training.hidden "
                 "(training_by_dataset may set one per graph).")
PERF = {
    "perf_hybrid": (
        DATASET, MODEL, P,
        Column("rows_<strategy>", "rows", "Rows one layer's exchange sends, all ranks, under pre, post or hybrid."),
        Column("min_pre_post_over_hybrid", "x", "min(rows_pre, rows_post) / rows_hybrid (the paper's Table 5)."),
        Column("max_rows_by_rank_hybrid", "rows", "The most rows one rank sends under hybrid."),
        Column("max_peers_by_rank", "ranks", "The most peers one rank sends anything to under hybrid."),
        Column("epoch_mib_<strategy>", "MiB", "Bytes all ranks send in one FP32 training epoch under the strategy "
               "(GAT's scores and scalars included), 1 MiB = 2^20 B."),
        Column("post_over_hybrid_bytes", "x", "epoch_mib_post / epoch_mib_hybrid."),
    ),
    "perf_predictions": (
        DATASET, P, MACHINE, MODEL, STRATEGY, BITS, _HIDDEN,
        Column("aggregate_first", "", "Whether every layer aggregates before it projects, as upstream "
               "(training.aggregate_first: wider exchanges where a layer narrows)."),
        Column("layer_seconds", "s", f"{_PREDICTED} its time."),
        Column("transfer_seconds", "s", f"{_PREDICTED} its bytes over the bandwidth."),
        Column("latency_seconds", "s", f"{_PREDICTED} its calls and per-peer message costs."),
        Column("quantization_seconds", "s", f"{_PREDICTED} quantizing and dequantizing (0 in FP32)."),
        Column("latency_bound", "", "Whether latency_seconds exceeds transfer_seconds."),
        Column("data_bytes", "B", f"{_PREDICTED} the data bytes the bottleneck rank sends."),
        Column("param_bytes", "B", f"{_PREDICTED} the quantization parameters' bytes it sends."),
        Column("layer_attention_seconds", "s", "GAT's score and scalar exchanges beside that layer's rows (0 for the "
               "other models)."),
        Column("epoch_aggregation_seconds", "s", "A training epoch's aggregation, slowest rank."),
        Column("epoch_exchange_seconds", "s", "A training epoch's exchanges, forward and backward."),
        Column("epoch_seconds", "s", "epoch_aggregation_seconds + epoch_exchange_seconds (dense layers excluded)."),
        Column("epoch_bytes", "B", "Bytes all ranks send in a training epoch."),
        Column("epoch_attention_bytes", "B", "Of those, GAT's scores and scalars."),
        Column("alpha", "", "Eq. 7's alpha = F / 2 (quantized rows only)."),
        Column("beta", "", "Eq. 7's beta: the (de)quantization round trip's throughput over the bandwidth."),
        Column("gamma", "", "Eq. 7's gamma = 32 / bits."),
        Column("delta", "", "Eq. 7's delta: (P - 1) latencies over the quantized transfer time of the bottleneck "
               "rank."),
        Column("speedup_eq8", "x", "Eq. 8's predicted speedup of the quantized exchange over FP32."),
        Column("speedup_eq8_approx", "x", "The paper's approximation of it, (gamma + delta) / (1 + delta)."),
    ),
    "perf_regime": (
        DATASET, MACHINE, MODEL, P, BITS,
        Column("fp32_layer_ms", "ms", "The hybrid FP32 per-layer exchange, predicted."),
        Column("quant_layer_ms", "ms", "The hybrid quantized per-layer exchange, predicted."),
        Column("speedup", "x", "fp32_layer_ms / quant_layer_ms: the full model's speedup."),
        Column("speedup_eq8", "x", "Eq. 8's."),
        Column("speedup_eq8_approx", "x", "Eq. 8's approximation."),
        Column("delta", "", "Eq. 7's delta (latency : quantized transfer)."),
        Column("fp32_bound", "", "`latency` or `throughput`: which term bounds the FP32 exchange."),
        Column("quant_bound", "", "The same for the quantized exchange."),
    ),
    "perf_crossover": (
        DATASET, MACHINE, MODEL, BITS,
        Column("latency_bound_from_P", "ranks", "The P from which the hybrid exchange stays latency-bound at every "
               "larger P of the study; empty: not in its range."),
        Column("no_gain_from_P", "ranks", "Quantized widths: the P from which the exchange is no faster than FP32 at "
               "every larger P; empty: not in range (or FP32)."),
        Column("mop_fewer_bytes_from_P", "ranks", "GraphSAGE: the first P of the first run of studied P at which "
               "MixGCN's mixture of parallelism (perf_methods' mixgcn) sends no more bytes per epoch than this "
               "hybrid exchange; the curves cross between the studied P before it and it. Empty: at no P studied, "
               "or a model MixGCN does not train (GAT)."),
        Column("mop_fewer_bytes_to_P", "ranks", "That run's last P: the largest studied P where MixGCN's bytes stay "
               "at most the hybrid exchange's; below the study's largest P, they cross back after it."),
        Column("mop_faster_exchange_from_P", "ranks", "The same for a training epoch's exchange seconds on this "
               "machine: MixGCN's transposes against the hybrid exchange's Alltoallv calls."),
        Column("mop_faster_exchange_to_P", "ranks", "That run's last P."),
        Column("largest_P_studied", "ranks", "The study's largest P."),
    ),
    "perf_cost": (
        DATASET, MODEL,
        Column("nodes", "nodes", "The graph's nodes."),
        Column("edges", "entries", "Its directed adjacency entries."),
        P,
        Column("partition_s", "s", "The partition's own work (its manifest)."),
        Column("partition_peak_mib", "MiB", "Peak resident memory of the partition's process."),
        Column("plan_s", "s", "The hybrid plan's own work (the model's plan: GAT's cover is weighted)."),
        Column("plan_peak_mib", "MiB", "Peak resident memory of the plan's process."),
    ),
    "perf_methods": (
        DATASET, P, MACHINE, _HIDDEN,
        Column("method", "", "hybrid-int2 / post-fp32: SuperGCN's GraphSAGE epoch as perf_predictions has it; "
               "vanilla: the synchronous post exchange BNS-GCN and PipeGCN start from (aggregate first, layer 0 "
               "precomputed); bns-<p>: BNS-GCN at boundary rate p; pipegcn: PipeGCN; sar: SAR, the post plan's "
               "rows one peer at a time (P - 1 pairwise steps per exchange), at the widths its runs exchange (nothing "
               "precomputed, narrowing layers projecting first); mixgcn: MixGCN's mixture "
               "of parallelism, the partition's parts as row blocks (two all-to-all transposes per layer)."),
        Column("epoch_exchange_seconds", "s", "A training epoch's Alltoallv calls, each at its bottleneck rank "
               "(BNS-GCN's id exchange included); sar: its pairwise steps, each a two-rank exchange's call and "
               "latency plus the slowest rank's bytes."),
        Column("epoch_aggregation_seconds", "s", "The aggregation of the rank whose compute is slowest."),
        Column("epoch_dense_seconds", "s", "That rank's dense layers: nodes x flops per node over the profile's "
               "GEMM throughput plus a call cost per GEMM; empty where the profile has no GEMM throughput."),
        Column("epoch_seconds", "s", "Compute (aggregation + dense) + exchange; pipegcn: the larger of the two."),
        Column("epoch_bytes", "B", "Bytes all ranks send in a training epoch."),
        Column("epoch_calls", "calls", "Alltoallv calls per epoch (a quantized exchange makes two); sar: its "
               "pairwise steps."),
        Column("memory_bytes_per_rank", "B", "mixgcn: the largest rank's replicated adjacency, 8 (N + 1) + "
               "8 nnz, plus its column slices, 4 N c_i per layer; vanilla: the largest receive buffer, every "
               "peer's rows at the widest layer; sar: the largest one peer's; empty for the others (not "
               "modelled)."),
    ),
    "perf_validation": (
        P, STRATEGY, BITS,
        Column("oversubscribed", "", "Whether the ranks outnumbered the cores: the model does not hold there."),
        Column("predicted_ms", "ms", "One exchange of the plan's rows, predicted with this machine's profile."),
        Column("measured_ms", "ms", "The same exchange timed by `supergcn bench comm` (median, slowest rank)."),
        Column("relative_error", "fraction", "predicted_ms / measured_ms - 1."),
        Column("predicted_comm_ms", "ms", "The prediction's transfer + latency."),
        Column("measured_comm_ms", "ms", "The measured communication part."),
        Column("predicted_quant_ms", "ms", "The prediction's (de)quantization."),
        Column("measured_quant_ms", "ms", "The measured (de)quantization part."),
    ),
}

#: Every table's columns, by the table's name (:data:`supergcn.naming.TABLES`, then
#: :data:`supergcn.naming.PERF_TABLES`).
COLUMNS: dict[str, tuple[Column, ...]] = {
    "runs": RUNS, "scaling": SCALING, "breakdown": BREAKDOWN, "accuracy": ACCURACY,
    "time_to_accuracy": TIME_TO_ACCURACY, "volume": VOLUME, "preprocessing": PREPROCESSING, **PERF,
}


def undeclared_columns(table: str, headers) -> list[str]:
    """The headers of a written ``table`` that no :class:`Column` of it matches.

    Args:
        table: a table's name (a key of :data:`COLUMNS`).
        headers: the table's column headers.

    Returns:
        Those headers, in order.
    """
    return [header for header in headers if not any(column.matches(header) for column in COLUMNS[table])]


def glossary_markdown(table: str) -> str:
    """``table``'s columns as a Markdown table (column, unit, meaning), for the docs.

    Args:
        table: a table's name (a key of :data:`COLUMNS`).

    Returns:
        The Markdown.
    """
    rows = [f"| `{c.name}` | {c.unit} | {c.meaning.replace('|', '&#124;')} |" for c in COLUMNS[table]]
    return "\n".join(["| column | unit | meaning |", "|---|---|---|", *rows])
