"""The plan-only performance-model study's figures (:data:`supergcn.naming.PERF_FIGURES`,
PNG and PDF each), drawn from its tables (:mod:`supergcn.perf.study`) with the study
figures' toolkit (:mod:`supergcn.report.styles`)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from supergcn.naming import precision_name
from supergcn.report.styles import pyplot, save_figure


def _width_label(bits: int) -> str:
    """FP32, BF16, Int8, Int4, Int2."""
    return precision_name(int(bits)).upper().replace("INT", "Int")

def plot_perf_study(tables_dir: Path, out_dir: Path) -> None:
    """Per-layer hybrid exchange time vs P for each machine and dataset, FP32 vs quantized,
    with the transfer and latency terms (the paper's Fig. 7, for the first model of the
    study, GraphSAGE where it is one); each model's exchange time per training epoch vs P,
    hybrid, FP32 and quantized (GAT beside SAGE); and the partition/plan cost.

    Args:
        tables_dir: the directory holding ``perf_predictions.csv`` and ``perf_cost.csv``.
        out_dir: where ``perf_comm_scaling``, ``perf_models`` and ``perf_cost`` (PNG and PDF) are written.

    Raises:
        SuperGCNError: a figure file cannot be written, or the disk filled.
    """
    plt = pyplot()
    predictions = pd.read_csv(tables_dir / "perf_predictions.csv")
    hybrid = predictions[predictions["strategy"] == "hybrid"]
    datasets = sorted(hybrid["dataset"].unique())
    machines = sorted(hybrid["machine"].unique())

    def panels():
        """A figure of one log-log panel per dataset and machine, with that panel's rows."""
        figure, axes = plt.subplots(len(datasets), len(machines), figsize=(4.5 * len(machines),
                                                                           3.6 * len(datasets)), squeeze=False)
        for row, dataset in enumerate(datasets):
            for column, machine in enumerate(machines):
                ax = axes[row][column]
                ax.set_xscale("log", base=2)
                ax.set_yscale("log")
                ax.set_title(f"{dataset} on {machine}")
                ax.set_xlabel("P (ranks)")
        chosen = [(axes[r][c], hybrid[(hybrid["dataset"] == d) & (hybrid["machine"] == m)])
                  for r, d in enumerate(datasets) for c, m in enumerate(machines)]
        return figure, axes[0][0], chosen

    first_model = hybrid["model"].iloc[0] if len(hybrid) else None
    figure, legend_axes, chosen = panels()
    for ax, rows in chosen:
        for bits, group in rows[rows["model"] == first_model].groupby("bits"):
            group = group.sort_values("P")
            label = _width_label(bits)
            line, = ax.plot(group["P"], group["layer_seconds"] * 1e3, marker="o", label=f"{label} total")
            ax.plot(group["P"], group["transfer_seconds"] * 1e3, linestyle="--", color=line.get_color(),
                    label=f"{label} transfer")
            ax.plot(group["P"], group["latency_seconds"] * 1e3, linestyle=":", color=line.get_color(),
                    label=f"{label} latency")
        ax.set_ylabel(f"ms per layer exchange ({first_model})")
    legend_axes.legend(fontsize="small")
    figure.tight_layout()
    save_figure(figure, out_dir / "perf_comm_scaling")

    figure, legend_axes, chosen = panels()
    for ax, rows in chosen:
        for (model, bits), group in rows.groupby(["model", "bits"]):
            group = group.sort_values("P")
            label = _width_label(bits)
            ax.plot(group["P"], group["epoch_exchange_seconds"] * 1e3, marker="o",
                    linestyle="-" if bits == 32 else "--", label=f"{model} {label}")
        ax.set_ylabel("ms of exchanges per epoch")
    legend_axes.legend(fontsize="small")
    figure.tight_layout()
    save_figure(figure, out_dir / "perf_models")

    _plot_perf_cost(plt, pd.read_csv(tables_dir / "perf_cost.csv"), out_dir)


def _plot_perf_cost(plt, cost: pd.DataFrame, out_dir: Path) -> None:
    """Partition time and memory per graph, and each model's plan's, vs P (``perf_cost``)."""
    figure, (time_axes, memory_axes) = plt.subplots(1, 2, figsize=(10, 4))
    for dataset, by_dataset in cost.groupby("dataset"):
        partition = by_dataset.drop_duplicates("P").sort_values("P")
        line, = time_axes.plot(partition["P"], partition["partition_s"], marker="o", label=f"{dataset} partition")
        memory_axes.plot(partition["P"], partition["partition_peak_mib"], marker="o", color=line.get_color(),
                         label=f"{dataset} partition")
        for (model, group), style in zip(by_dataset.groupby("model"), ("--", ":", "-.", (0, (1, 3)))):
            group = group.sort_values("P")
            time_axes.plot(group["P"], group["plan_s"], marker="s", linestyle=style, color=line.get_color(),
                           label=f"{dataset} plan ({model})")
            memory_axes.plot(group["P"], group["plan_peak_mib"], marker="s", linestyle=style, color=line.get_color(),
                             label=f"{dataset} plan ({model})")
    for ax, label in ((time_axes, "seconds"), (memory_axes, "peak MiB")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("P (ranks)")
        ax.set_ylabel(label)
    time_axes.legend(fontsize="small")
    figure.tight_layout()
    save_figure(figure, out_dir / "perf_cost")
