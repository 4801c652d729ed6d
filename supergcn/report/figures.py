"""Figures of a scaling study (PNG and PDF), drawn from the tables of :mod:`supergcn.report.tables`.

Epoch-time bars with a speed-up line (Figs. 9/10), stacked breakdown bars (Fig. 12),
accuracy curves against epochs and training seconds (Fig. 11), volume bars (Table 5), and the performance-model
study's exchange-time and cost figures (Fig. 7).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from supergcn.data.storage import atomic_file
from supergcn.distributed.timing import DETAIL
from supergcn.errors import SuperGCNError, first_line
from supergcn.naming import FIGURES, OPTIONAL_TABLES
from supergcn.report.curves import accuracy_curve


def read_tables(paths) -> dict[str, pd.DataFrame]:
    """The CSV tables of ``supergcn tables`` that the figures are drawn from, by name.

    Args:
        paths: ``<table>.csv`` files, one for each table of :data:`supergcn.naming.FIGURES`;
            an optional one (:data:`supergcn.naming.OPTIONAL_TABLES`) left out leaves its
            figure out.

    Returns:
        Table name (the file's stem) -> table.

    Raises:
        SuperGCNError: a file is none of those tables or given twice, a table a figure
            needs is not given, or a table is missing or unreadable.
    """
    drawn_from = list(dict.fromkeys(figure.table for figure in FIGURES.values()))
    expected = ", ".join(f"{name}.csv" + (" (optional)" if name in OPTIONAL_TABLES else "") for name in drawn_from)
    given = {}
    for path in map(Path, paths):
        if path.suffix != ".csv" or path.stem not in drawn_from or path.stem in given:
            raise SuperGCNError(f"{path} is not one of the tables the figures are drawn from, or is given twice",
                                f"pass each of {expected} once")
        given[path.stem] = path
    needed = [name for name in drawn_from if name not in given and name not in OPTIONAL_TABLES]
    if needed:
        raise SuperGCNError(f"the {needed[0]} table is not among the tables given", f"pass each of {expected}")
    read = {}
    for name, path in given.items():
        if not path.is_file():
            raise SuperGCNError(f"table {path} not found", f"run `supergcn tables --out-dir {path.parent}` first")
        try:
            read[name] = pd.read_csv(path)
        except (ValueError, OSError) as exc:  # pandas' ParserError and EmptyDataError are ValueErrors
            raise SuperGCNError(f"table {path} is damaged ({first_line(exc)})",
                                f"rerun `supergcn tables --out-dir {path.parent}`") from exc
    return read


def runs_with_metrics(runs: pd.DataFrame, metrics_files) -> pd.DataFrame:
    """The ``runs`` table with each run's metrics file the one given of ``metrics_files``, so
    that the accuracy curves read only files they were given.

    Args:
        runs: the ``runs`` table (its ``metrics`` column names the files).
        metrics_files: the runs' metrics files.

    Returns:
        ``runs`` with its ``metrics`` column spelled as given.

    Raises:
        SuperGCNError: a given file is missing, or the table names a file not given.
    """
    given = {}
    for path in map(Path, metrics_files):
        if not path.is_file():
            raise SuperGCNError(f"metrics file {path} not found", "run its training job first")
        given[path.resolve()] = path
    named = [Path(path) for path in runs["metrics"]]
    missing = [path for path in named if path.resolve() not in given]
    if missing:
        raise SuperGCNError(f"the runs table names {len(missing)} metrics file(s) not given, {missing[0]} the first",
                            "pass every metrics file of the runs table (`supergcn figures --runs`)")
    return runs.assign(metrics=[str(given[path.resolve()]) for path in named])


def pyplot():
    """matplotlib.pyplot on the file-only Agg back end.

    Returns:
        The ``matplotlib.pyplot`` module.
    """
    import matplotlib
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    return plt


def _panels(table: pd.DataFrame):
    """A figure with one panel per dataset of ``table``: (figure, [(axes, dataset), ...])."""
    datasets = _datasets(table)
    figure, axes = pyplot().subplots(1, len(datasets), figsize=(6 * len(datasets), 4), squeeze=False)
    return figure, list(zip(axes[0], datasets))


def save_figure(figure, stem: Path) -> None:
    """``stem``.png and .pdf, each written under a temporary name and renamed.

    Args:
        figure: a matplotlib figure, closed afterwards.
        stem: the files' path without suffix.

    Raises:
        SuperGCNError: a file cannot be written, or the disk filled.
    """
    for suffix in (".png", ".pdf"):
        with atomic_file(stem.with_suffix(suffix)) as tmp:
            figure.savefig(tmp, dpi=150, bbox_inches="tight", format=suffix[1:])
    pyplot().close(figure)


def _datasets(table):
    return list(dict.fromkeys(table["dataset"]))


def _bar_positions(num_groups: int, num_bars: int):
    width = 0.8 / max(num_bars, 1)
    return np.arange(num_groups), width


def plot_scaling(scaling: pd.DataFrame, stem: Path) -> None:
    """Epoch-time bars per variant with each variant's speed-up as a line, one panel per
    dataset (the paper's Figs. 9/10); a variant's speed-up relative to a P other than 1 is
    named in the legend, and a P at which any run was oversubscribed is marked under its tick.

    Args:
        scaling: the ``scaling`` table.
        stem: the figure files' path without suffix (:func:`save_figure`).

    Raises:
        SuperGCNError: a file cannot be written, or the disk filled.
    """
    figure, panels = _panels(scaling)
    for ax, dataset in panels:
        data = scaling[scaling["dataset"] == dataset]
        process_counts = sorted(data["P"].unique())
        variants = list(dict.fromkeys(data["variant"]))
        x, width = _bar_positions(len(process_counts), len(variants))
        speed = ax.twinx()
        for k, variant in enumerate(variants):
            rows = data[data["variant"] == variant].set_index("P").reindex(process_counts)
            base = int(rows["speedup_base_P"].min())
            # A variant without a P = 1 run scales from its smallest P: the legend says so, lest
            # its 1.0 there read as perfect scaling.
            label = variant if base == 1 else f"{variant} (speed-up vs P = {base})"
            ax.bar(x + (k - (len(variants) - 1) / 2) * width, rows["epoch_seconds"], width, label=label)
            speed.plot(x, rows["speedup"], marker="o", linestyle="--")
        oversubscribed = [p for p in process_counts if data.loc[data["P"] == p, "oversubscribed"].eq(True).any()]
        ax.set_xticks(x, [f"{p}\noversubscribed" if p in oversubscribed else str(p) for p in process_counts])
        ax.set_xlabel("processes P")
        ax.set_ylabel("epoch time (s), bars")
        speed.set_ylabel("speed-up vs P = 1 (or the P the legend names), lines")
        ax.set_title(dataset)
        ax.legend(fontsize="small")
    save_figure(figure, stem)


def plot_breakdown(breakdown: pd.DataFrame, stem: Path) -> None:
    """The slowest rank's seconds per phase, stacked, per P, one panel per dataset and variant
    (the paper's Fig. 12, its ``other`` drawn as its parts).

    Args:
        breakdown: the ``breakdown`` table.
        stem: the figure files' path without suffix (:func:`save_figure`).

    Raises:
        SuperGCNError: a file cannot be written, or the disk filled.
    """
    plt = pyplot()
    groups = list(dict.fromkeys(zip(breakdown["dataset"], breakdown["variant"])))
    figure, axes = plt.subplots(1, len(groups), figsize=(3.2 * len(groups), 4), squeeze=False, sharey=False)
    for ax, (dataset, variant) in zip(axes[0], groups):
        rows = breakdown[(breakdown["dataset"] == dataset) & (breakdown["variant"] == variant)].sort_values("P")
        bottom = np.zeros(len(rows))
        # The paper's "other" drawn as its parts (dense, elementwise, ...): what a user can act on.
        for phase in DETAIL:
            values = rows[f"{phase}_seconds"].to_numpy()
            ax.bar([str(p) for p in rows["P"]], values, bottom=bottom, label=phase)
            bottom += values
        ax.set_title(f"{dataset}\n{variant}", fontsize="small")
        ax.set_xlabel("processes P")
    axes[0][0].set_ylabel("seconds per epoch (slowest rank)")
    axes[0][-1].legend(fontsize="small")
    save_figure(figure, stem)


def plot_accuracy_curves(runs: pd.DataFrame, stem: Path) -> None:
    """Test accuracy of every variant at the largest P (its first seed) against the epoch
    (top row) and against the training seconds until then (bottom row, the paper's Fig. 11
    question: which variant gets there first in time, not only in epochs).

    Args:
        runs: the ``runs`` table (its ``metrics`` column names the files read).
        stem: the figure files' path without suffix (:func:`save_figure`).

    Raises:
        SuperGCNError: a metrics file cannot be read, or a figure file written.
    """
    datasets = _datasets(runs)
    figure, axes = pyplot().subplots(2, len(datasets), figsize=(6 * len(datasets), 8), squeeze=False,
                                     constrained_layout=True)
    for column, dataset in enumerate(datasets):
        data = runs[runs["dataset"] == dataset]
        largest = data["P"].max()
        for variant in dict.fromkeys(data["variant"]):
            chosen = data[(data["variant"] == variant) & (data["P"] == largest)].sort_values("seed").iloc[0]
            curve = accuracy_curve(chosen["metrics"])
            for ax, x in zip(axes[:, column], ("epoch", "seconds")):
                ax.plot(curve[x], 100 * curve["test_acc"], label=variant)
        for ax, label in zip(axes[:, column], ("epoch", "training seconds (epoch times summed)")):
            ax.set_xlabel(label)
            ax.set_ylabel("test accuracy (%)")
            ax.set_title(f"{dataset}, P = {largest}")
            ax.legend(fontsize="small")
    save_figure(figure, stem)


def plot_volume(volume: pd.DataFrame, stem: Path) -> None:
    """Bytes of one layer's exchange per strategy (and hybrid's Int2 data and parameters), per
    P above 1, one panel per dataset (the paper's Table 5).

    Args:
        volume: the ``volume`` table.
        stem: the figure files' path without suffix (:func:`save_figure`).

    Raises:
        SuperGCNError: a file cannot be written, or the disk filled.
    """
    columns = [c for c in ("pre_bytes", "post_bytes", "hybrid_bytes", "hybrid_int2_bytes") if c in volume]
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
    save_figure(figure, stem)


#: Each figure of :data:`supergcn.naming.FIGURES` and the function that draws it from its table.
PLOTS = {"scaling": plot_scaling, "breakdown": plot_breakdown, "accuracy_curves": plot_accuracy_curves,
         "volume": plot_volume}


def plot_study(tables: dict[str, pd.DataFrame], out_dir: Path) -> None:
    """Every figure of :data:`supergcn.naming.FIGURES` whose table is given, as
    ``out_dir/<figure>`` (PNG and PDF).

    Args:
        tables: table name -> table (:func:`read_tables`, the runs table's metrics files
            checked by :func:`runs_with_metrics`).
        out_dir: the figures' directory.

    Raises:
        SuperGCNError: a metrics file cannot be read, or a figure file written.
    """
    for name, figure in FIGURES.items():
        if figure.table in tables:
            PLOTS[name](tables[figure.table], Path(out_dir) / name)


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
            label = "FP32" if bits == 32 else f"Int{bits}"
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
            label = "FP32" if bits == 32 else f"Int{bits}"
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
