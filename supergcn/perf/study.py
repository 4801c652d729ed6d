"""The plan-only scaling study: the performance model applied to real partitions and plans.

Three steps, each a ``supergcn perf`` sub-command and a pipeline rule:

* ``profile`` — a machine profile as JSON (:mod:`supergcn.perf.machines`);
* ``predict`` — for one (graph, P): Comm[i][j] of pre, post and hybrid from the hybrid
  plan's manifest, and the model's per-layer exchange and per-epoch times on every
  machine for FP32 and each quantized width; for GraphSAGE also BNS-GCN's, PipeGCN's and
  MixGCN's epochs beside SuperGCN's (:mod:`supergcn.perf.methods`);
* ``tables`` / ``figures`` — the study's tables (hybrid vs pre/post, predicted times,
  latency-bound regime and crossovers, partition and plan cost, the compared methods, model
  vs measurement) and figures; ``tables`` prints a line per graph: where MixGCN's mixture
  of parallelism crosses the hybrid exchange (:func:`mixture_crossover_lines`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from supergcn.data.graph import read_graph_meta
from supergcn.data.storage import read_json
from supergcn.errors import SuperGCNError
from supergcn.models import card
from supergcn.naming import (
    DEFAULT_MODEL,
    DEFAULT_PARAMETER_DTYPE,
    PARAMETER_DTYPES,
    PERF_TABLES,
    QUANTIZED_BITS,
    STRATEGIES,
)
from supergcn.partition.store import read_part_totals, read_partition_manifest
from supergcn.perf import methods
from supergcn.perf import prediction as perfmodel
from supergcn.perf.machines import load_profile
from supergcn.perf.prediction import MachineProfile
from supergcn.perf.traffic import epoch_traffic
from supergcn.plan.statistics import strategy_row_kinds
from supergcn.plan.store import plan_strategy_rows, read_plan_manifest, read_plan_pairs
from supergcn.report.table_files import write_named_tables

# 2: per model; 3: the compared methods (GraphSAGE); 4: MixGCN's mixture of parallelism among them
PREDICTION_FORMAT = "supergcn-prediction/4"


def predict(graph_dir: str | Path, partition_dir: str | Path, plan_dir: str | Path, machines: list[MachineProfile],
            hidden: int, num_layers: int, bits: list[int], parameter_dtype: str = DEFAULT_PARAMETER_DTYPE,
            model: str = DEFAULT_MODEL, heads: int = 1, boundary_rates=methods.DEFAULT_BOUNDARY_RATES,
            aggregate_first: bool = False) -> dict:
    """Every strategy x bit width x machine prediction for one (graph, P, model);
    quantization parameters travel as ``parameter_dtype`` (bfloat16 or float32); with
    ``aggregate_first`` every layer aggregates before it projects, as upstream (the training
    option's: wider exchanges where a layer narrows).
    For GraphSAGE, ``methods`` holds each machine's epoch of SuperGCN's hybrid + Int2 and
    post FP32, of BNS-GCN at each of ``boundary_rates``, PipeGCN and MixGCN's mixture of
    parallelism on the partition's parts as row blocks (:func:`method_records`).

    ``plan_dir`` is the hybrid plan ``model`` trains on (GAT's holds the cover weighted by
    its row costs; its manifest's ``cover`` is recorded). Pre and post follow from any plan.
    A record's ``layer_*`` entries are one hidden layer's forward exchange of rows, with
    ``layer_attention_seconds`` GAT's score and scalar exchanges beside it; its ``epoch_*``
    entries are a training epoch's aggregation and exchanges (:func:`supergcn.perf.traffic.epoch_traffic`).
    """
    meta = read_graph_meta(graph_dir)
    partition = read_partition_manifest(partition_dir, meta["hash"])  # of this graph, or refused
    plan = read_plan_manifest(plan_dir, meta["hash"], partition["partition_hash"])
    if plan["strategy"] != "hybrid":
        raise SuperGCNError(f"{plan_dir} is a {plan['strategy']} plan",
                            "pass a hybrid plan: the study reads pre, post and hybrid volumes from its manifest")
    num_ranks = plan["num_ranks"]
    pairs = read_plan_pairs(plan_dir)
    kinds = strategy_row_kinds(pairs, num_ranks, "hybrid")
    rows = {strategy: pre + post for strategy, (pre, post) in kinds.items()}
    totals = read_part_totals(partition_dir)
    predictions = []
    for strategy in STRATEGIES:
        for width_bits in [32, *bits]:
            if width_bits != 32 and strategy != "hybrid":
                continue  # the paper quantizes the hybrid exchange only
            layer_load = perfmodel.ExchangeLoad.of(rows[strategy], hidden, width_bits, parameter_dtype)
            traffic = epoch_traffic(model, *kinds[strategy], meta["feature_dim"], hidden, meta["num_classes"],
                                    num_layers, width_bits, heads, aggregate_first)
            loads = perfmodel.epoch_loads(traffic, parameter_dtype)
            # a forward hidden layer's score and scalar exchanges (GAT's; none for the others)
            first_layer = zip(traffic.exchanges[:len(card(model).messages)], loads)
            attention = [load for step, load in first_layer if step.kind == "attention"]
            for machine in machines:
                layer = perfmodel.load_time(layer_load, machine)
                epoch = perfmodel.epoch_seconds(traffic, totals["edges"], totals["nodes"], machine, parameter_dtype,
                                                loads)
                record = {"machine": machine.name, "model": model, "strategy": strategy, "bits": width_bits,
                          "layer_seconds": layer.seconds, "transfer_seconds": layer.transfer_seconds,
                          "latency_seconds": layer.latency_seconds,
                          "quantization_seconds": layer.quantization_seconds,
                          "latency_bound": layer.latency_bound, "data_bytes": layer.data_bytes,
                          "param_bytes": layer.param_bytes,
                          "layer_attention_seconds": sum(perfmodel.load_time(load, machine).seconds
                                                         for load in attention),
                          "epoch_aggregation_seconds": epoch["aggregation"],
                          "epoch_exchange_seconds": epoch["exchange"], "epoch_seconds": epoch["total"],
                          "epoch_bytes": epoch["bytes"], "epoch_attention_bytes": epoch["attention_bytes"]}
                if width_bits in QUANTIZED_BITS:  # Eq. 7-8 are of quantized exchanges
                    record.update(perfmodel.paper_ratios(rows[strategy], hidden, width_bits, machine))
                predictions.append(record)
    peers = (rows["hybrid"] > 0).sum(axis=1)
    layers = methods.Layers(meta["feature_dim"], hidden, meta["num_classes"], num_layers, aggregate_first)
    compared = (method_records(kinds, pairs, totals, layers, machines, boundary_rates, parameter_dtype)
                if model == methods.METHODS_MODEL else [])
    return {
        "format": PREDICTION_FORMAT, "graph": meta["name"], "graph_hash": meta["hash"],
        "num_nodes": meta["num_nodes"], "num_edges": meta["num_edges_directed"], "num_ranks": num_ranks,
        "model": model, "hidden": hidden, "heads": heads, "aggregate_first": aggregate_first,
        "cover": plan.get("cover"),
        "parameter_dtype": parameter_dtype, "parameter_bytes": PARAMETER_DTYPES[parameter_dtype],
        "rows": {strategy: int(matrix.sum()) for strategy, matrix in rows.items()},
        "max_rows_by_rank": {strategy: int(matrix.sum(axis=1).max()) for strategy, matrix in rows.items()},
        "max_peers_by_rank": int(peers.max()), "mean_peers_by_rank": float(peers.mean()),
        "partition_seconds": partition["seconds"], "partition_peak_memory_mib": partition.get("peak_memory_mib"),
        "plan_seconds": plan["seconds"], "plan_peak_memory_mib": plan.get("peak_memory_mib"),
        "predictions": predictions, "methods": compared,
    }


def method_records(kinds: dict, pairs: dict, totals: dict, layers: methods.Layers, machines: list[MachineProfile],
                   boundary_rates, parameter_dtype: str = DEFAULT_PARAMETER_DTYPE) -> list[dict]:
    """One record per machine and method of :func:`supergcn.perf.methods.method_epochs`
    and :func:`~supergcn.perf.methods.mixture_epoch`: its epoch's exchange, aggregation,
    dense (None where the profile has no GEMM throughput) and total seconds, bytes,
    Alltoallv calls and memory per rank (None where the model has none).

    Args:
        kinds: strategy -> (PRE rows, POST rows) of the hybrid plan.
        pairs: the plan's per-pair statistics (``src``, ``dst``, ``cut_edges``).
        totals: the partition's ``nodes`` and ``edges`` per rank.
        layers: the model's widths.
        machines: the profiles.
        boundary_rates: BNS-GCN's rates.
        parameter_dtype: the wire type of Int2's per-row parameters.

    Returns:
        The records.

    Raises:
        ValueError: a rate is outside [0, 1].
    """
    num_ranks = kinds["post"][1].shape[0]
    cut = np.zeros((num_ranks, num_ranks), dtype=np.int64)
    cut[pairs["src"], pairs["dst"]] = pairs["cut_edges"]
    records = []
    epochs = methods.method_epochs(kinds, cut, totals["edges"], layers, boundary_rates, parameter_dtype)
    epochs += [methods.mixture_epoch(method, totals["nodes"], layers, int(np.sum(totals["edges"])))
               for method in methods.predicted_methods("transposes")]
    for epoch in epochs:
        for machine in machines:
            seconds = methods.method_seconds(epoch, totals["nodes"], layers, machine)
            records.append({"machine": machine.name, "method": epoch.method,
                            "epoch_exchange_seconds": seconds["exchange"],
                            "epoch_aggregation_seconds": seconds["aggregation"],
                            "epoch_dense_seconds": None if np.isnan(seconds["dense"]) else seconds["dense"],
                            "epoch_seconds": seconds["total"], "epoch_bytes": epoch.bytes,
                            "epoch_calls": epoch.calls, "memory_bytes_per_rank": epoch.memory_bytes})
    return records


def _read_predictions(paths) -> list[dict]:
    documents = []
    for path in paths:
        document = read_json(Path(path), "prediction")
        if document.get("format") != PREDICTION_FORMAT:
            raise SuperGCNError(f"{path} is not a supergcn prediction", "write it with `supergcn perf predict`")
        documents.append(document)
    return documents


def _epoch_mib(document: dict, strategy: str) -> float:
    """MiB all ranks send in one FP32 training epoch of ``strategy`` (the same on every machine)."""
    record = next(p for p in document["predictions"] if p["strategy"] == strategy and p["bits"] == 32)
    return record["epoch_bytes"] / 2**20


def hybrid_table(documents: list[dict]) -> pd.DataFrame:
    """Rows sent per layer by pre, post and hybrid, and min(pre, post) / hybrid (Table 5's
    1.52x); per model, the MiB a training epoch sends in FP32 (GAT's scores and scalars
    included) and post's over hybrid's (what the peers that send every boundary source send)."""
    records = [{"dataset": d["graph"], "model": d["model"], "P": d["num_ranks"], "rows_pre": d["rows"]["pre"],
                "rows_post": d["rows"]["post"], "rows_hybrid": d["rows"]["hybrid"],
                "min_pre_post_over_hybrid": (min(d["rows"]["pre"], d["rows"]["post"]) / d["rows"]["hybrid"]
                                             if d["rows"]["hybrid"] else float("nan")),
                "max_rows_by_rank_hybrid": d["max_rows_by_rank"]["hybrid"],
                "max_peers_by_rank": d["max_peers_by_rank"],
                **{f"epoch_mib_{strategy}": _epoch_mib(d, strategy) for strategy in STRATEGIES},
                "post_over_hybrid_bytes": (_epoch_mib(d, "post") / _epoch_mib(d, "hybrid")
                                           if _epoch_mib(d, "hybrid") else float("nan"))} for d in documents]
    return pd.DataFrame.from_records(records).sort_values(["dataset", "model", "P"], kind="stable")


def prediction_table(documents: list[dict]) -> pd.DataFrame:
    """One row per dataset, P, machine, model, strategy and bit width: the model's per-layer and per-epoch times."""
    records = [{"dataset": d["graph"], "P": d["num_ranks"], **{key: p[key] for key in ("machine", "model", "strategy",
                                                                                     "bits")},
                "hidden": d["hidden"], "aggregate_first": d.get("aggregate_first", False), **p}
               for d in documents for p in d["predictions"]]
    return pd.DataFrame.from_records(records).sort_values(["dataset", "machine", "model", "P", "strategy", "bits"],
                                                          kind="stable")


def methods_table(documents: list[dict]) -> pd.DataFrame:
    """One row per dataset, P, machine and method (:mod:`supergcn.perf.methods`), from the
    GraphSAGE predictions, in the order the methods are predicted."""
    records = [{"dataset": d["graph"], "P": d["num_ranks"], "hidden": d["hidden"], **m}
               for d in documents for m in d.get("methods", [])]
    columns = ["dataset", "P", "machine", "hidden", "method", "epoch_exchange_seconds", "epoch_aggregation_seconds",
               "epoch_dense_seconds", "epoch_seconds", "epoch_bytes", "epoch_calls", "memory_bytes_per_rank"]
    return pd.DataFrame.from_records(records, columns=columns).sort_values(["dataset", "machine", "P"],
                                                                           kind="stable")


def regime_table(predictions: pd.DataFrame) -> pd.DataFrame:
    """Per dataset, machine, model and P: hybrid FP32 vs hybrid quantized per-layer time, the
    model's speedup, Eq. 8's, and which term bounds each exchange."""
    hybrid = predictions[predictions["strategy"] == "hybrid"]
    fp32 = hybrid[hybrid["bits"] == 32].set_index(["dataset", "machine", "model", "P"])
    records = []
    for (dataset, machine, model, num_ranks, bits), row in hybrid[hybrid["bits"] != 32].set_index(
            ["dataset", "machine", "model", "P", "bits"]).iterrows():
        base = fp32.loc[(dataset, machine, model, num_ranks)]
        records.append({"dataset": dataset, "machine": machine, "model": model, "P": num_ranks, "bits": bits,
                        "fp32_layer_ms": base["layer_seconds"] * 1e3, "quant_layer_ms": row["layer_seconds"] * 1e3,
                        "speedup": base["layer_seconds"] / row["layer_seconds"],
                        # Eq. 8 is the paper's for quantized widths: empty for bfloat16.
                        "speedup_eq8": row.get("speedup_eq8"), "speedup_eq8_approx": row.get("speedup_eq8_approx"),
                        "delta": row.get("delta"),
                        "fp32_bound": "latency" if base["latency_bound"] else "throughput",
                        "quant_bound": "latency" if row["latency_bound"] else "throughput"})
    return pd.DataFrame.from_records(records)


def _from_p(process_counts: np.ndarray, condition: np.ndarray) -> int | None:
    """The smallest P from which ``condition`` holds at every larger P of the study."""
    order = np.argsort(process_counts)
    holds = condition[order]
    if not holds[-1]:
        return None
    failing = np.flatnonzero(~holds)
    return int(process_counts[order][failing[-1] + 1 if len(failing) else 0])


def crossover_span(process_counts, values, reference) -> tuple[int, int] | None:
    """Where ``values`` first cross below ``reference``: the first run of consecutive studied
    P, smallest first, with values ≤ reference. The curves cross down between the studied P
    before its first P and it (at it, where they are equal there), and back up between its
    last P and the next studied one, if there is one.

    Args:
        process_counts: the studied P, in any order.
        values: one per P (MixGCN's epoch bytes or exchange seconds).
        reference: one per P (the partition-parallel exchange's).

    Returns:
        The run's first and last P, or None where values exceed reference at every studied P.
    """
    order = np.argsort(np.asarray(process_counts))
    counts = np.asarray(process_counts)[order]
    holds = (np.asarray(values) <= np.asarray(reference))[order]
    if not holds.any():
        return None
    first = int(np.argmax(holds))
    after = np.flatnonzero(~holds[first:])
    last = first + (int(after[0]) - 1 if len(after) else len(holds) - first - 1)
    return int(counts[first]), int(counts[last])


def crossover_table(predictions: pd.DataFrame, compared: pd.DataFrame) -> pd.DataFrame:
    """Per dataset, machine, model and bit width: the P from which the hybrid exchange stays
    latency-bound, (quantized widths) from which it is no faster than FP32, and (GraphSAGE)
    the first and last P of the first run of studied P at which MixGCN's mixture of
    parallelism sends no more bytes per epoch, and spends no longer in its exchanges, than
    this hybrid exchange (:func:`crossover_span`; ``compared`` is :func:`methods_table`)."""
    hybrid = predictions[predictions["strategy"] == "hybrid"]
    fp32 = hybrid[hybrid["bits"] == 32].set_index(["dataset", "machine", "model", "P"])["layer_seconds"]
    rows = [method.performance.row for method in methods.predicted_methods("transposes")]
    mixture = compared[compared["method"].isin(rows)].set_index(["dataset", "machine", "P"])
    records = []
    for (dataset, machine, model, bits), group in hybrid.groupby(["dataset", "machine", "model", "bits"]):
        counts = group["P"].to_numpy()
        record = {"dataset": dataset, "machine": machine, "model": model, "bits": bits,
                  "latency_bound_from_P": _from_p(counts, group["latency_bound"].to_numpy(dtype=bool)),
                  "no_gain_from_P": None}
        if bits != 32:
            baseline = fp32.loc[[(dataset, machine, model, p) for p in counts]].to_numpy()
            record["no_gain_from_P"] = _from_p(counts, group["layer_seconds"].to_numpy() >= baseline)
        keys = [(dataset, machine, p) for p in counts]
        mop = mixture.loc[keys] if model == methods.METHODS_MODEL and all(k in mixture.index for k in keys) else None
        for name, column in (("mop_fewer_bytes", "epoch_bytes"), ("mop_faster_exchange", "epoch_exchange_seconds")):
            span = None if mop is None else crossover_span(counts, mop[column], group[column])
            record[f"{name}_from_P"], record[f"{name}_to_P"] = span or (None, None)
        records.append({**record, "largest_P_studied": int(counts.max())})
    return pd.DataFrame.from_records(records)


def _span_words(first, last, largest: int) -> str:
    """A :func:`crossover_span` in words: ``from P = 8`` (to the largest), ``from P = 8 to 64``,
    ``at P = 8 only``, ``at no P studied``."""
    if pd.isna(first):
        return "at no P studied"
    if int(last) == largest:
        return f"from P = {int(first)}"
    return f"at P = {int(first)} only" if first == last else f"from P = {int(first)} to {int(last)}"


def mixture_crossover_lines(crossover: pd.DataFrame) -> list[str]:
    """The study's summary, a line per graph: at which P MixGCN's mixture of parallelism
    sends no more bytes per epoch than the hybrid exchange in FP32 and in Int2, and (per
    machine) spends no longer in its exchanges (:func:`crossover_table`).

    Args:
        crossover: :func:`crossover_table`.

    Returns:
        One line per dataset with GraphSAGE rows.
    """
    names = {32: "hybrid FP32", 2: "hybrid Int2"}
    rows = crossover[(crossover["model"] == methods.METHODS_MODEL) & crossover["bits"].isin(list(names))]
    lines = []
    for dataset, group in rows.groupby("dataset", sort=True):
        largest = int(group["largest_P_studied"].max())
        by_bits = sorted(group.groupby("bits"), key=lambda item: -item[0])
        sent = "; ".join(f"{names[bits]} " + _span_words(part["mop_fewer_bytes_from_P"].iloc[0],
                                                          part["mop_fewer_bytes_to_P"].iloc[0], largest)
                         for bits, part in by_bits)
        timed = "; ".join(f"{names[bits]}'s " + ", ".join(
            f"{row.machine} {_span_words(row.mop_faster_exchange_from_P, row.mop_faster_exchange_to_P, largest)}"
            for row in part.sort_values("machine").itertuples()) for bits, part in by_bits)
        lines.append(f"{dataset}: MixGCN's mixture of parallelism sends no more bytes per epoch than {sent}; "
                     f"its exchanges take no longer than {timed} (P up to {largest})")
    return lines


def cost_table(documents: list[dict]) -> pd.DataFrame:
    """Partition and hybrid plan wall time and peak memory per graph, model (its plan: GAT's
    weighted cover is a plan of its own) and P."""
    records = [{"dataset": d["graph"], "model": d["model"], "nodes": d["num_nodes"], "edges": d["num_edges"],
                "P": d["num_ranks"],
                "partition_s": d["partition_seconds"], "partition_peak_mib": d["partition_peak_memory_mib"],
                "plan_s": d["plan_seconds"], "plan_peak_mib": d["plan_peak_memory_mib"]} for d in documents]
    return pd.DataFrame.from_records(records).sort_values(["dataset", "model", "P"], kind="stable")


def validation_table(comm_results: list[dict], profile: MachineProfile) -> pd.DataFrame:
    """Model vs the exchanges ``supergcn bench comm --exchange`` timed in turn with its
    sweeps: predicted and measured seconds of one exchange and the relative error
    (predicted / measured - 1), with whether the ranks outnumbered the cores."""
    records = []
    for result in comm_results:
        for measured in result.get("exchanges", []):
            plan, rows = plan_strategy_rows(Path(measured["plan"]))
            predicted = perfmodel.exchange_time(rows[measured["strategy"]], measured["features"], measured["bits"],
                                                profile, measured["parameter_dtype"])
            seconds = measured["seconds"]
            records.append({"P": plan["num_ranks"], "strategy": measured["strategy"], "bits": measured["bits"],
                            "oversubscribed": result["oversubscribed"],
                            "predicted_ms": predicted.seconds * 1e3, "measured_ms": seconds["total"] * 1e3,
                            "relative_error": predicted.seconds / seconds["total"] - 1,
                            "predicted_comm_ms": (predicted.transfer_seconds + predicted.latency_seconds) * 1e3,
                            "measured_comm_ms": seconds["communication"] * 1e3,
                            "predicted_quant_ms": predicted.quantization_seconds * 1e3,
                            "measured_quant_ms": seconds["quantization"] * 1e3})
    return pd.DataFrame.from_records(records).sort_values(["P", "strategy", "bits"], kind="stable")


def write_tables(prediction_paths, validation: list[Path], profile_path, out_dir: Path) -> None:
    """The study's tables (:data:`supergcn.naming.PERF_TABLES`) into ``out_dir``, and its
    summary (:func:`mixture_crossover_lines`) on standard output.

    Args:
        prediction_paths: the ``supergcn perf predict`` results.
        validation: ``supergcn bench comm`` results to check the model against (none: no
            ``perf_validation`` table).
        profile_path: the measured profile of the machine that ran them.
        out_dir: the tables' directory.

    Raises:
        SuperGCNError: an input cannot be read, or a table written.
    """
    documents = _read_predictions(prediction_paths)
    predictions = prediction_table(documents)
    compared = methods_table(documents)
    crossover = crossover_table(predictions, compared)
    widths = sorted({d["hidden"] for d in documents})
    hidden = f"width {widths[0]}" if len(widths) == 1 else "each graph's width (hidden)"
    written = {
        "perf_hybrid": (hybrid_table(documents),
                        "Rows sent per layer by pre, post and hybrid aggregation, and min(pre, post) / hybrid "
                        "(the paper's Table 5, mag240M at 2,048 ranks: 1,934.9 / 1,269.6 GB = 1.52x)."),
        "perf_predictions": (predictions,
                             f"Model predictions at {hidden}: per-layer exchange (s) at the bottleneck rank "
                             "and its transfer, latency and quantization parts; aggregation + exchange per epoch "
                             "(s)."),
        "perf_regime": (regime_table(predictions),
                        "Hybrid FP32 vs quantized per-layer exchange: the model's speedup, Eq. 8's, delta (latency : "
                        "quantized transfer) and which term bounds each exchange."),
        "perf_crossover": (crossover,
                           "P from which the hybrid exchange stays latency-bound, from which a quantized one is no "
                           "faster than FP32, and (GraphSAGE) from which MixGCN's mixture of parallelism sends no "
                           "more bytes per epoch and spends no longer in its exchanges than this hybrid exchange, "
                           "over the study's process counts (empty: not in its range)."),
        "perf_cost": (cost_table(documents),
                      "Partition and hybrid-plan wall time (s) and peak memory (MiB) per graph and P."),
        "perf_methods": (compared,
                         f"GraphSAGE at {hidden}: SuperGCN's hybrid + Int2 and post FP32 beside BNS-GCN "
                         "(boundary rate p) and PipeGCN, both on the post plan with layer 0 precomputed (vanilla: "
                         "their synchronous exchange), and MixGCN's mixture of parallelism on the parts as row "
                         "blocks. Per epoch: exchange, aggregation and dense seconds at the slowest rank (dense "
                         "empty where the profile has no GEMM throughput), epoch seconds (compute + exchange; "
                         "PipeGCN: their maximum), bytes sent by all ranks, Alltoallv calls; MixGCN's memory per "
                         "rank (replicated adjacency and column slices)."),
    }
    if validation:
        profile = load_profile(profile_path)
        results = [read_json(Path(path), "bench comm result") for path in validation]
        written["perf_validation"] = (validation_table(results, profile),
                                      f"Model vs measured time of one exchange on {profile.name}, both taken in the "
                                      "same job (relative error = predicted / measured - 1); rows taken with more "
                                      "ranks than cores are marked oversubscribed: there the ranks share cores and "
                                      "the model does not hold.")
    write_named_tables(written, PERF_TABLES, out_dir)
    for line in mixture_crossover_lines(crossover):
        print(line, flush=True)
