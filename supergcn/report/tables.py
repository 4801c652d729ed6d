"""Result tables of a scaling study, from metrics files and plan manifests.

Tables (each as CSV, Markdown and LaTeX, :func:`supergcn.report.table_files.write_table`):

* ``scaling`` — mean epoch time (max over ranks, first epoch excluded) per dataset,
  variant and P, with speed-up and parallel efficiency relative to the variant's P = 1
  run, or to its smallest P where it has none (``speedup_base_P`` says which; the data
  of the paper's Figs. 9/10), whether the runs were oversubscribed, the largest peak
  memory of a rank, bytes sent per epoch, AdaQP's re-assignment seconds per epoch, and
  optionally each variant's
  speed-up over a baseline variant (Fig. 9's lines); variants the paper names, DistGNN's
  included, appear under its names (:func:`supergcn.variants.display_name`);
* ``breakdown`` — aggregation / communication / quantization / synchronization / other
  of the slowest rank, per P and variant (Fig. 12), and ``other`` split into dense,
  elementwise, optimizer and remainder (:mod:`supergcn.distributed.timing`);
* ``accuracy`` — test accuracy at the best-validation epoch, mean ± std over seeds
  (Table 3), and at the lowest validation loss (upstream's model selection);
* ``time_to_accuracy`` — per split (validation, test) and accuracy target (absolute, or a
  share of the best accuracy of the dataset in the study), the first epoch at which a run
  reaches it and the training seconds until then (the sum of its epoch times, the first
  epoch included; evaluation excluded), mean over the seeds that reach it (the check of the
  paper's Fig. 11 claim that label propagation converges faster);
* ``volume`` and ``preprocessing``, tables of the pipeline's steps rather than its runs:
  :mod:`supergcn.report.step_tables`.

What every column of every table means, in which unit: :mod:`supergcn.report.columns`.

The figures drawn from them are :mod:`supergcn.report.figures`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from supergcn.errors import SuperGCNError
from supergcn.report.columns import PHASE_COLUMNS
from supergcn.report.curves import TARGET_SPLITS, accuracy_curve
from supergcn.report.spread import pooled_sd, ratio_sd
from supergcn.train.metrics import read_metrics, timed_epochs
from supergcn.variants import Variant, display_name

#: An accuracy of runs without validation or test nodes.
NOT_AVAILABLE = "n/a"
#: The runs table's columns of a mini-batch run's cache hit rate, this and the layer (from 0,
#: the input layer's).
HIT_RATE_PREFIX = "hit_rate_layer_"
#: DistGNN-MB's convergence criterion (its §4.5): a run has converged at the first epoch whose
#: test accuracy is within this many points of the single-rank run's, here its variant's
#: P = 1 runs' final test accuracy (mean over their seeds).
CONVERGENCE_MARGIN = 1.0


def run_record(path: str | Path) -> dict:
    """One row describing a finished training run.

    Args:
        path: a finished run's metrics file.

    Returns:
        Dataset, P, strategy, bits, label propagation, seed, threads, whether the ranks
        outnumbered the cores (None where the file does not say) and epochs; mean
        epoch time, its sample standard deviation over the timed epochs and their count, and
        the slowest rank's seconds per phase (first epochs excluded); peak
        memory, bytes sent and re-assignment seconds per epoch; the seconds of SAR's
        refetches (:func:`refetch_seconds`); the accuracies; the
        variant's name and the file's path; a mini-batch run's steps per epoch and cache hit
        rate per layer (:func:`minibatch_columns`).

    Raises:
        SuperGCNError: the metrics file is missing, damaged or incomplete.
    """
    header, epochs, summary = read_metrics(path)
    config = header["config"]
    timed = timed_epochs(epochs)  # each process's first epoch pays one-off costs, as in the paper
    seconds = [e["seconds"]["max"]["total"] for e in timed]
    record = {
        "dataset": header["dataset"], "P": header["num_ranks"], "strategy": header["strategy"],
        "bits": config["bits"], "label_propagation": config["label_rate"] > 0,
        "seed": config["seed"], "threads_per_rank": header["threads_per_rank"],
        # Metrics files written before it was recorded lack it: unknown, not False.
        "oversubscribed": header.get("oversubscribed"), "epochs": summary["epochs"],
        "epoch_seconds": float(np.mean(seconds)),
        "epoch_seconds_sd": float(np.std(seconds, ddof=1)) if len(seconds) > 1 else None,
        "timed_epochs": len(seconds),
        # The slowest rank's phases add up to the epoch time (per-phase maxima need not).
        **{column: float(np.mean([e["seconds"]["slowest_rank"][phase] for e in timed]))
           for phase, column in PHASE_COLUMNS.items()},
        "peak_memory_gib": max(summary["peak_memory_bytes_per_rank"]) / 2**30,
        "bytes_sent_per_epoch": float(np.mean([e["bytes"]["sent_total"] for e in timed])),
        # AdaQP's re-assignments run between epochs (only those epochs have the record): their
        # cost spread over all epochs.
        "assignment_seconds_per_epoch": sum(e["bit_assignment"]["seconds"] for e in epochs if "bit_assignment" in e)
        / max(len(epochs), 1),
        "refetch_seconds": refetch_seconds(timed),
        "test_acc_at_best_val": summary["test_acc_at_best_val"], "best_val_acc": summary["best_val_acc"],
        # None where a run had no validation (or test) nodes.
        "test_acc_at_min_val_loss": summary["test_acc_at_min_val_loss"],
        "final_test_acc": summary["final"]["test_acc"], "metrics": str(path),
    }
    record["variant"] = Variant.from_options(record["strategy"], config).name
    record["name"] = display_name(record["variant"], config)
    return {**record, **minibatch_columns(epochs)}


def run_names(runs: pd.DataFrame) -> dict[str, str]:
    """What each variant's rows are called: the name its runs go by (their ``name``, from
    their own options), or its label where its runs would name it apart (runs of one
    variant under other settings, such as AdaQP's rounding).

    Args:
        runs: :func:`runs_table`'s rows.

    Returns:
        Variant -> name.
    """
    found = runs.groupby("variant")["name"].unique()
    return {variant: names[0] if len(names) == 1 else variant for variant, names in found.items()}


def refetch_seconds(timed: list[dict]) -> float | None:
    """The seconds per timed epoch a sequential exchange's backward spent fetching peers'
    rows again (SAR's GAT under ``--sar sar``: its epoch lines' ``sequential_aggregation``,
    the slowest rank's), within the communication phase; None for a run without the record.

    Args:
        timed: the run's timed epoch records.

    Returns:
        Their mean, or None.
    """
    seconds = [e["sequential_aggregation"]["refetch_seconds"] for e in timed
               if "refetch_seconds" in e.get("sequential_aggregation", {})]
    return float(np.mean(seconds)) if seconds else None


def minibatch_columns(epochs: list[dict]) -> dict:
    """A mini-batch run's steps per epoch (the same in every epoch) and each layer's cache hit
    rate over the whole run: its epochs' hits over their lookups, Σ_e r_e n_e / Σ_e n_e for
    an epoch's rate r_e of n_e lookups (None where nothing was looked up).

    Args:
        epochs: the run's epoch records.

    Returns:
        ``minibatch_steps`` (None for a full-batch run, which has nothing else) and
        ``hit_rate_layer_<l>`` per layer l.
    """
    records = [epoch["minibatch"] for epoch in epochs if "minibatch" in epoch]
    if not records:
        return {"minibatch_steps": None}
    lookups = np.sum([record["lookups"] for record in records], axis=0)
    hits = np.sum([[round((rate or 0.0) * count) for rate, count in zip(record["hit_rate"], record["lookups"])]
                   for record in records], axis=0)
    return {"minibatch_steps": records[-1]["steps"],
            **{f"{HIT_RATE_PREFIX}{layer}": float(hit / count) if count else None
               for layer, (hit, count) in enumerate(zip(hits, lookups))}}


def runs_table(metrics_files) -> pd.DataFrame:
    """One :func:`run_record` row per metrics file.

    Args:
        metrics_files: paths of finished runs' metrics files.

    Returns:
        The runs, one row each.

    Raises:
        SuperGCNError: a metrics file is missing, damaged or incomplete.
    """
    table = pd.DataFrame.from_records([run_record(p) for p in metrics_files])
    # A full-batch run has no hit rates: where one comes first, they would follow the last column.
    rates = sorted((column for column in table.columns if column.startswith(HIT_RATE_PREFIX)),
                   key=lambda column: int(column.removeprefix(HIT_RATE_PREFIX)))
    columns = [column for column in table.columns if column not in rates]
    after = columns.index("minibatch_steps") + 1
    table = table[[*columns[:after], *rates, *columns[after:]]]
    return table.assign(minibatch_steps=table["minibatch_steps"].astype("Int64"))


def scaling_table(runs: pd.DataFrame, baseline: str | None = None) -> pd.DataFrame:
    """Epoch time, bytes sent per epoch (all ranks) and AdaQP's re-assignment time per
    epoch (outside the epoch time) per dataset, variant and P; speed-up and efficiency
    against the variant's run at ``speedup_base_P``: P = 1, or its smallest P where it has
    no P = 1 run (efficiency then relative to that P's); whether any of the runs was
    oversubscribed (:func:`any_oversubscribed`); with ``baseline`` (a variant), also each
    variant's speed-up over it at the same dataset and P, like the lines of the paper's Fig. 9.

    Each time has its spread: the standard deviation of every timed epoch of every seed's
    run together (:func:`~supergcn.report.spread.pooled_sd`: between the runs and within
    them), over ``runs`` runs (1: one run, whose spread is its epochs' alone); speed-ups and
    efficiencies carry theirs to first order (:func:`~supergcn.report.spread.ratio_sd`).

    Args:
        runs: :func:`runs_table`'s rows.
        baseline: a variant's name, or None.

    Returns:
        One row per dataset, variant and P.

    Raises:
        SuperGCNError: ``baseline`` is not a variant of ``runs``.
    """
    groups = runs.groupby(["dataset", "variant", "P"])
    spread = groups.apply(lambda rows: pooled_sd(rows["timed_epochs"], rows["epoch_seconds"],
                                                 rows["epoch_seconds_sd"]), include_groups=False)
    table = (groups.agg(epoch_seconds=("epoch_seconds", "mean"), runs=("seed", "count"),
                        oversubscribed=("oversubscribed", any_oversubscribed),
                  peak_memory_gib=("peak_memory_gib", "max"),
                  bytes_sent_per_epoch=("bytes_sent_per_epoch", "mean"),
                        assignment_seconds_per_epoch=("assignment_seconds_per_epoch", "mean"))
             .join(spread.rename("epoch_seconds_sd")).reset_index().sort_values(["dataset", "variant", "P"]))
    table.insert(table.columns.get_loc("epoch_seconds") + 1, "epoch_seconds_sd", table.pop("epoch_seconds_sd"))
    table.insert(2, "name", table["variant"].map(run_names(runs)))
    # Rows are sorted by P: each variant's first is its P = 1 run where it has one. Its own
    # values, missing ones too (pandas' "first" skips a missing sd for the next P's).
    by_variant = table.groupby(["dataset", "variant"])
    base_P, base, base_sd = (by_variant[column].transform(lambda values: values.iloc[0])
                             for column in ("P", "epoch_seconds", "epoch_seconds_sd"))
    table["speedup_base_P"] = base_P
    table["speedup"] = base / table["epoch_seconds"]
    at_base = table["P"] == table["speedup_base_P"]  # the base against itself: 1 exactly
    table["speedup_sd"] = ratio_sd(table["speedup"], base, base_sd, table["epoch_seconds"],
                                   table["epoch_seconds_sd"]).mask(at_base, 0.0)
    table["efficiency"] = table["speedup"] * table["speedup_base_P"] / table["P"]
    table["efficiency_sd"] = table["speedup_sd"] * table["speedup_base_P"] / table["P"]
    if baseline is not None:
        if baseline not in set(table["variant"]):
            raise SuperGCNError(f"the speed-up baseline {baseline!r} is not a variant of this study",
                                f"choose one of {', '.join(sorted(set(table['variant'])))}")
        reference = (table[table["variant"] == baseline].set_index(["dataset", "P"])[["epoch_seconds",
                                                                                      "epoch_seconds_sd"]]
                     .rename(columns=lambda column: f"baseline_{column}"))
        table = table.join(reference, on=["dataset", "P"])
        versus = table.pop("baseline_epoch_seconds") / table["epoch_seconds"]
        table[f"speedup_vs_{baseline}"] = versus
        table[f"speedup_vs_{baseline}_sd"] = ratio_sd(versus, versus * table["epoch_seconds"],
                                                      table.pop("baseline_epoch_seconds_sd"), table["epoch_seconds"],
                                                      table["epoch_seconds_sd"]).mask(table["variant"] == baseline,
                                                                                      0.0)
    return table.reset_index(drop=True)


def any_oversubscribed(flags) -> bool | None:
    """Whether any of some runs was oversubscribed: True if one was, None (unknown) if none
    was but one's metrics file does not say, else False.

    Args:
        flags: the runs' ``oversubscribed`` (True, False or None).

    Returns:
        True, False or None.
    """
    flags = [None if pd.isna(flag) else bool(flag) for flag in flags]
    if True in flags:
        return True
    return None if None in flags else False


def scaling_caption(table: pd.DataFrame, baseline: str | None = None) -> str:
    """The caption of :func:`scaling_table`'s ``table``: what its figures are relative to,
    and which of its rows' times are of ranks that shared cores.

    Args:
        table: :func:`scaling_table`'s rows.
        baseline: the variant ``table`` gives every variant's speed-up over, or None.

    Returns:
        The caption.
    """
    caption = ("Epoch time (s, max over ranks, mean over epochs after each process's first and over seeds) and "
               "its standard deviation over every such epoch of the row's runs (between seeds and within a run; "
               "runs = 1: one run, whose spread is its epochs' alone, and runs of the same work differ by more); "
               "speed-up and parallel efficiency relative to the same variant at P = speedup_base_P, each with "
               "its spread carried from the times'. Figures are shown to the second significant digit of their "
               "spread")
    if baseline is not None:
        caption += f"; speed-up over {baseline} at the same P"
    caption += "."
    relative = table[table["speedup_base_P"] != 1]
    if len(relative):
        variants = ", ".join(f"{v} (P = {p})" for v, p in dict.fromkeys(zip(relative["variant"],
                                                                             relative["speedup_base_P"])))
        caption += (f" Without a P = 1 run, {variants}: speed-up and efficiency relative to that P, not to one "
                    "process (efficiency 1 there by definition).")
    marked = table.loc[table["oversubscribed"].eq(True), "P"]
    if len(marked):
        counts = ", ".join(f"P = {p}" for p in sorted(set(marked)))
        caption += (f" Rows marked oversubscribed ({counts}): a host ran more ranks x threads than it has CPUs, "
                    "so ranks shared cores and those times do not measure scaling.")
    if table["oversubscribed"].isna().any():
        caption += " oversubscribed empty: the runs' metrics files predate that record."
    return caption


def breakdown_table(runs: pd.DataFrame) -> pd.DataFrame:
    """The slowest rank's mean seconds per phase (:data:`PHASE_COLUMNS`), the part of its
    communication SAR's refetches took, and the epoch time, per dataset, variant and P (the
    paper's Fig. 12).

    Args:
        runs: :func:`runs_table`'s rows.

    Returns:
        One row per dataset, variant and P.
    """
    columns = [*PHASE_COLUMNS.values(), "refetch_seconds", "epoch_seconds"]
    runs = runs.assign(refetch_seconds=pd.to_numeric(runs["refetch_seconds"]))  # None -> NaN: empty where none
    table = (runs.groupby(["dataset", "variant", "P"], as_index=False)[columns].mean()
             .sort_values(["dataset", "variant", "P"]).reset_index(drop=True))
    table.insert(2, "name", table["variant"].map(run_names(runs)))
    return table


def accuracy_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Test accuracy (%) at the best-validation-accuracy epoch (OGB) and at the lowest
    validation loss (upstream's model selection), mean ± std over seeds.

    Args:
        runs: :func:`runs_table`'s rows.

    Returns:
        One row per dataset, variant and P: means, standard deviations, the seeds and the
        two accuracies as text (:data:`NOT_AVAILABLE` without a value).
    """
    keys = ["dataset", "variant", "P"]
    runs = runs.assign(at_val_loss=pd.to_numeric(runs["test_acc_at_min_val_loss"]),  # None -> NaN
                       at_best_val=pd.to_numeric(runs["test_acc_at_best_val"]))
    table = (runs.groupby(keys).agg(test_acc_mean=("at_best_val", "mean"),
                                    test_acc_std=("at_best_val", "std"),
                                    seeds=("seed", "count"),
                                    val_loss_test_acc_mean=("at_val_loss", "mean"),
                                    val_loss_test_acc_std=("at_val_loss", "std"))
             .reset_index())
    for column in ("test_acc_mean", "test_acc_std", "val_loss_test_acc_mean", "val_loss_test_acc_std"):
        table[column] = table[column] * 100
    for stem in ("test_acc", "val_loss_test_acc"):
        table[f"{stem}_std"] = table[f"{stem}_std"].fillna(0.0)
        table[stem] = [NOT_AVAILABLE if np.isnan(m) else f"{m:.2f} ± {s:.2f}"
                       for m, s in zip(table[f"{stem}_mean"], table[f"{stem}_std"])]
    table.insert(2, "name", table["variant"].map(run_names(runs)))
    return table[[*keys[:2], "name", keys[2], "test_acc_mean", "test_acc_std", "seeds", "test_acc",
                  "val_loss_test_acc_mean",
                  "val_loss_test_acc_std", "val_loss_test_acc"]]


def time_to_accuracy_table(runs: pd.DataFrame, absolute=(), relative=()) -> pd.DataFrame:
    """First epoch and training seconds at which each run's validation and test accuracy
    reach each target, mean (and std of the seconds) over the seeds that reach it; and, on
    the test split of a variant with P = 1 runs, DistGNN-MB's convergence (its §4.5): the
    first epoch at which the test accuracy reaches a - m, for a the mean final test accuracy
    of the dataset and variant's P = 1 runs and m = :data:`CONVERGENCE_MARGIN` points, at
    every P (P = 1 included).

    Args:
        runs: :func:`runs_table`'s rows.
        absolute: targets in % (e.g. 90).
        relative: targets as a share of the best accuracy any run of the same dataset
            reaches on that split in any epoch (e.g. 0.99).

    Returns:
        One row per dataset, variant, P, split and target: ``reached`` (runs reaching it
        of runs), ``epoch_mean``, ``seconds_mean`` and ``seconds_std``.

    Raises:
        SuperGCNError: a metrics file is missing, damaged or incomplete.
    """
    keys = ["dataset", "variant", "P"]
    curves = {path: accuracy_curve(path) for path in runs["metrics"]}
    best = {(dataset, split): max(curves[path][f"{split}_acc"].max() for path in group["metrics"])
            for dataset, group in runs.groupby("dataset") for split in TARGET_SPLITS}
    ones = runs[runs["P"] == 1]
    single_rank = (pd.to_numeric(ones["final_test_acc"]).groupby([ones["dataset"], ones["variant"]]).mean().dropna()
                   - CONVERGENCE_MARGIN / 100)
    converged = f"P = 1 final - {CONVERGENCE_MARGIN:g} pt"
    rows = []
    for run in runs.itertuples():
        curve = curves[run.metrics]
        for split in TARGET_SPLITS:
            if np.isnan(best[run.dataset, split]):
                continue  # no run of the dataset has this split
            targets = ([(f"{a:g} %", a / 100) for a in absolute]
                       + [(f"{r:g} x best", r * best[run.dataset, split]) for r in relative])
            if split == "test" and (run.dataset, run.variant) in single_rank.index:
                targets.append((converged, single_rank[run.dataset, run.variant]))
            for target, accuracy in targets:
                reached = curve[curve[f"{split}_acc"] >= accuracy]
                first = reached.iloc[0] if len(reached) else {"epoch": np.nan, "seconds": np.nan}
                rows.append({"dataset": run.dataset, "variant": run.variant, "P": run.P, "split": split,
                             "target": target, "target_acc": 100 * accuracy, "epoch": first["epoch"],
                             "seconds": first["seconds"]})
    columns = [*keys, "split", "target", "target_acc"]
    if not rows:
        return pd.DataFrame(columns=[*keys[:2], "name", *columns[2:], "reached", "epoch_mean", "seconds_mean",
                                     "seconds_std"])
    table = (pd.DataFrame.from_records(rows)
             .groupby(columns, sort=False)
             .agg(runs=("epoch", "size"), reached_runs=("epoch", "count"), epoch_mean=("epoch", "mean"),
                  seconds_mean=("seconds", "mean"), seconds_std=("seconds", "std"))
             .reset_index()
             .sort_values(["dataset", "split", "target_acc", "variant", "P"], kind="stable"))
    table["seconds_std"] = table["seconds_std"].mask(table["epoch_mean"].notna() & table["seconds_std"].isna(), 0.0)
    table.insert(2, "name", table["variant"].map(run_names(runs)))
    table.insert(len(columns) + 1, "reached", [f"{k}/{n}" for k, n in zip(table.pop("reached_runs"),
                                                                           table.pop("runs"))])
    return table.reset_index(drop=True)
