"""Result tables and figures of a scaling study, from metrics files and plan manifests.

Tables (each as CSV, Markdown and LaTeX):

* ``scaling`` — mean epoch time (max over ranks, first epoch excluded) per dataset,
  variant and P, with speed-up and parallel efficiency relative to the smallest P
  (the data of the paper's Figs. 9/10);
* ``breakdown`` — aggregation / communication / quantization / synchronization / other
  of the slowest rank, per P and variant (Fig. 12);
* ``accuracy`` — test accuracy at the best-validation epoch, mean ± std over seeds
  (Table 3);
* ``volume`` — bytes one layer exchanges at the hidden width under pre / post / hybrid
  and hybrid + Int2, data and parameters separately (Table 5).

Figures (PNG and PDF): epoch-time bars with a speed-up line, stacked breakdown bars,
accuracy-vs-epoch curves (Fig. 11) and volume bars.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from supergcn.errors import SuperGCNError
from supergcn.plan import read_plan_manifest
from supergcn.storage import atomic_file, write_text
from supergcn.timing import PHASES

BREAKDOWN = (*PHASES, "other")


def variant_name(strategy: str, bits: int, label_propagation: bool) -> str:
    """The label of a training variant in paths, tables and figures."""
    return f"{strategy}-{'fp32' if bits == 32 else f'int{bits}'}-{'lp' if label_propagation else 'nolp'}"


def read_metrics(path: str | Path) -> tuple[dict, list[dict], dict]:
    lines = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    if not lines or lines[0].get("type") != "header" or lines[-1].get("type") != "summary":
        raise SuperGCNError(f"{path} is not a complete metrics file: rerun its training job")
    return lines[0], [r for r in lines if r["type"] == "epoch"], lines[-1]


def run_record(path: str | Path) -> dict:
    """One row describing a finished training run."""
    header, epochs, summary = read_metrics(path)
    config = header["config"]
    timed = epochs[1:] or epochs  # the first epoch pays one-off costs, as in the paper
    record = {
        "dataset": header["dataset"], "P": header["num_ranks"], "strategy": header["strategy"],
        "bits": config.get("bits", 32), "label_propagation": config.get("label_rate", 0.0) > 0,
        "seed": config["seed"], "threads_per_rank": header["threads_per_rank"], "epochs": summary["epochs"],
        "epoch_seconds": float(np.mean([e["seconds"]["max"]["total"] for e in timed])),
        # The slowest rank's phases add up to the epoch time (per-phase maxima need not).
        **{f"{phase}_seconds": float(np.mean([e["seconds"]["slowest_rank"][phase] for e in timed]))
           for phase in BREAKDOWN},
        "bytes_sent_per_epoch": float(np.mean([e["bytes"]["sent_total"] for e in timed])),
        "test_acc_at_best_val": summary["test_acc_at_best_val"], "best_val_acc": summary["best_val_acc"],
        "final_test_acc": summary["final"]["test_acc"], "metrics": str(path),
    }
    record["variant"] = variant_name(record["strategy"], record["bits"], record["label_propagation"])
    return record


def runs_table(metrics_files) -> pd.DataFrame:
    return pd.DataFrame.from_records([run_record(p) for p in metrics_files])


def scaling_table(runs: pd.DataFrame) -> pd.DataFrame:
    table = (runs.groupby(["dataset", "variant", "P"], as_index=False)["epoch_seconds"].mean()
             .sort_values(["dataset", "variant", "P"]))
    base = table.groupby(["dataset", "variant"])["P"].transform("min")
    base_time = table.groupby(["dataset", "variant"])["epoch_seconds"].transform("first")
    table["speedup"] = base_time / table["epoch_seconds"]
    table["efficiency"] = table["speedup"] / (table["P"] / base)
    return table.reset_index(drop=True)


def breakdown_table(runs: pd.DataFrame) -> pd.DataFrame:
    columns = [f"{phase}_seconds" for phase in BREAKDOWN]
    return (runs.groupby(["dataset", "variant", "P"], as_index=False)[columns + ["epoch_seconds"]].mean()
            .sort_values(["dataset", "variant", "P"]).reset_index(drop=True))


def accuracy_table(runs: pd.DataFrame) -> pd.DataFrame:
    grouped = runs.groupby(["dataset", "variant", "P"])["test_acc_at_best_val"]
    table = grouped.agg(["mean", "std", "count"]).reset_index()
    table["mean"] *= 100
    table["std"] = table["std"].fillna(0.0) * 100
    table["test_acc"] = [f"{m:.2f} ± {s:.2f}" for m, s in zip(table["mean"], table["std"])]
    return table.rename(columns={"mean": "test_acc_mean", "std": "test_acc_std", "count": "seeds"})


def volume_table(plans: list[tuple[str, str | Path]], width: int) -> pd.DataFrame:
    """Bytes of one layer's exchange at ``width`` features for every (dataset, plan)."""
    from supergcn.volume import layer_bytes

    records = {}
    for dataset, directory in plans:
        manifest = read_plan_manifest(directory)
        key = (dataset, manifest["num_ranks"])
        pairs = manifest["pairs"]
        row = records.setdefault(key, {"dataset": dataset, "P": manifest["num_ranks"]})
        row["pre_bytes"] = layer_bytes([p["distinct_destinations"] for p in pairs], width, 32)[0]
        row["post_bytes"] = layer_bytes([p["distinct_sources"] for p in pairs], width, 32)[0]
        if manifest["strategy"] == "hybrid":
            hybrid_rows = [p["rows"] for p in pairs]
            row["hybrid_bytes"] = layer_bytes(hybrid_rows, width, 32)[0]
            row["hybrid_int2_data_bytes"], row["hybrid_int2_param_bytes"] = layer_bytes(hybrid_rows, width, 2)
    table = pd.DataFrame.from_records(list(records.values())).sort_values(["dataset", "P"]).reset_index(drop=True)
    if "hybrid_bytes" in table:
        best_single = table[["pre_bytes", "post_bytes"]].min(axis=1)
        table["hybrid_reduction"] = best_single / table["hybrid_bytes"].replace(0, np.nan)
        table["int2_reduction"] = table["hybrid_bytes"] / table["hybrid_int2_data_bytes"].replace(0, np.nan)
    return table


def write_table(table: pd.DataFrame, stem: str | Path, caption: str) -> None:
    """``stem``.csv, .md and .tex."""
    stem = Path(stem)
    write_text(stem.with_suffix(".csv"), table.to_csv(index=False))
    write_text(stem.with_suffix(".md"), f"{caption}\n\n{table.to_markdown(index=False, floatfmt='.4g')}\n")
    write_text(stem.with_suffix(".tex"), table.to_latex(index=False, float_format="%.4g", caption=caption,
                                                        label=f"tab:{stem.name}", escape=True))


# -- figures ------------------------------------------------------------------------

def _pyplot():
    import matplotlib
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    return plt


def _panels(table: pd.DataFrame):
    """A figure with one panel per dataset of ``table``: (figure, [(axes, dataset), ...])."""
    datasets = _datasets(table)
    figure, axes = _pyplot().subplots(1, len(datasets), figsize=(6 * len(datasets), 4), squeeze=False)
    return figure, list(zip(axes[0], datasets))


def _save(figure, stem: Path) -> None:
    """``stem``.png and .pdf, each written under a temporary name and renamed."""
    for suffix in (".png", ".pdf"):
        with atomic_file(stem.with_suffix(suffix)) as tmp:
            figure.savefig(tmp, dpi=150, bbox_inches="tight", format=suffix[1:])
    _pyplot().close(figure)


def _datasets(table):
    return list(dict.fromkeys(table["dataset"]))


def _bar_positions(num_groups: int, num_bars: int):
    width = 0.8 / max(num_bars, 1)
    return np.arange(num_groups), width


def plot_scaling(scaling: pd.DataFrame, stem: Path) -> None:
    figure, panels = _panels(scaling)
    for ax, dataset in panels:
        data = scaling[scaling["dataset"] == dataset]
        process_counts = sorted(data["P"].unique())
        variants = list(dict.fromkeys(data["variant"]))
        x, width = _bar_positions(len(process_counts), len(variants))
        speed = ax.twinx()
        for k, variant in enumerate(variants):
            rows = data[data["variant"] == variant].set_index("P").reindex(process_counts)
            ax.bar(x + (k - (len(variants) - 1) / 2) * width, rows["epoch_seconds"], width, label=variant)
            speed.plot(x, rows["speedup"], marker="o", linestyle="--")
        ax.set_xticks(x, [str(p) for p in process_counts])
        ax.set_xlabel("processes P")
        ax.set_ylabel("epoch time (s), bars")
        speed.set_ylabel("speed-up vs smallest P, lines")
        ax.set_title(dataset)
        ax.legend(fontsize="small")
    _save(figure, stem)


def plot_breakdown(breakdown: pd.DataFrame, stem: Path) -> None:
    plt = _pyplot()
    groups = list(dict.fromkeys(zip(breakdown["dataset"], breakdown["variant"])))
    figure, axes = plt.subplots(1, len(groups), figsize=(3.2 * len(groups), 4), squeeze=False, sharey=False)
    for ax, (dataset, variant) in zip(axes[0], groups):
        rows = breakdown[(breakdown["dataset"] == dataset) & (breakdown["variant"] == variant)].sort_values("P")
        bottom = np.zeros(len(rows))
        for phase in BREAKDOWN:
            values = rows[f"{phase}_seconds"].to_numpy()
            ax.bar([str(p) for p in rows["P"]], values, bottom=bottom, label=phase)
            bottom += values
        ax.set_title(f"{dataset}\n{variant}", fontsize="small")
        ax.set_xlabel("processes P")
    axes[0][0].set_ylabel("seconds per epoch (slowest rank)")
    axes[0][-1].legend(fontsize="small")
    _save(figure, stem)


def plot_accuracy_curves(runs: pd.DataFrame, stem: Path) -> None:
    figure, panels = _panels(runs)
    for ax, dataset in panels:
        data = runs[runs["dataset"] == dataset]
        largest = data["P"].max()
        for variant in dict.fromkeys(data["variant"]):
            chosen = data[(data["variant"] == variant) & (data["P"] == largest)].sort_values("seed").iloc[0]
            _, epochs, _ = read_metrics(chosen["metrics"])
            ax.plot([e["epoch"] for e in epochs], [100 * e["test_acc"] for e in epochs], label=variant)
        ax.set_xlabel("epoch")
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(f"{dataset}, P = {largest}")
        ax.legend(fontsize="small")
    _save(figure, stem)


def plot_volume(volume: pd.DataFrame, stem: Path) -> None:
    columns = [c for c in ("pre_bytes", "post_bytes", "hybrid_bytes", "hybrid_int2_data_bytes") if c in volume]
    figure, panels = _panels(volume)
    for ax, dataset in panels:
        rows = volume[(volume["dataset"] == dataset) & (volume["P"] > 1)].sort_values("P")
        x, width = _bar_positions(len(rows), len(columns))
        for k, column in enumerate(columns):
            ax.bar(x + (k - (len(columns) - 1) / 2) * width, rows[column] / 2**20, width,
                   label=column.removesuffix("_bytes").replace("_", " "))
        ax.set_xticks(x, [str(p) for p in rows["P"]])
        ax.set_xlabel("processes P")
        ax.set_ylabel("MiB per layer exchange")
        ax.set_title(dataset)
        ax.legend(fontsize="small")
    _save(figure, stem)
