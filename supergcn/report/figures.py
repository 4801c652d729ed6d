"""Figures of a scaling study (PNG and PDF), drawn from the tables of :mod:`supergcn.report.tables`.

Epoch-time bars with a speed-up line (Figs. 9/10), stacked breakdown bars (Fig. 12),
accuracy curves against epochs and training seconds (Fig. 11), volume bars (Table 5), and the performance-model
study's exchange-time and cost figures (Fig. 7).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from supergcn.distributed.timing import DETAIL
from supergcn.errors import SuperGCNError, first_line
from supergcn.naming import FIGURES, OPTIONAL_TABLES
from supergcn.report.curves import accuracy_curve
from supergcn.report.styles import (
    HATCHES,
    legend_columns,
    legend_inches,
    pyplot,
    save_figure,
    shared_legend,
    variant_styles,
)
from supergcn.variants import display_name


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


def _panels(table: pd.DataFrame, legend_labels=()):
    """A figure with one panel per dataset of ``table``, taller by the shared legend of
    ``legend_labels`` below them: (figure, [(axes, dataset), ...])."""
    datasets = _datasets(table)
    width = 6 * len(datasets)
    height = 4 + (legend_inches(len(legend_labels), legend_columns(legend_labels, width)) if legend_labels else 0)
    figure, axes = pyplot().subplots(1, len(datasets), figsize=(width, height), squeeze=False, layout="constrained")
    return figure, list(zip(axes[0], datasets))


def _datasets(table):
    return list(dict.fromkeys(table["dataset"]))


def _bar_positions(num_groups: int, num_bars: int):
    width = 0.8 / max(num_bars, 1)
    return np.arange(num_groups), width


def shown_names(table) -> dict[str, str]:
    """What a figure calls each variant: the name its table shows (its ``name`` column, from
    the runs' options: :func:`supergcn.variants.display_name`, its paper's where it is a
    published configuration; a table without one, from the label), with its label beside it
    where two variants of the figure would share one.

    Args:
        table: a table's rows, with its ``variant`` column (and ``name``, where it has one).

    Returns:
        Variant -> its name in the figure.
    """
    unique = list(dict.fromkeys(table["variant"]))
    given = dict(zip(table["variant"], table["name"])) if "name" in table else {}
    names = {variant: given.get(variant) or _display_name(variant) for variant in unique}
    shared = {name for name in names.values() if list(names.values()).count(name) > 1}
    return {variant: f"{name} [{variant}]" if name in shared and name != variant else name
            for variant, name in names.items()}


def _display_name(label: str) -> str:
    """A variant's display name; a label that names no variant (a table written by hand) as it is."""
    try:
        return display_name(label)
    except ValueError:
        return label


def _speedup_label(name: str, bases: dict[str, int]) -> str:
    """A variant's legend label: its name, and the P its speed-up is relative to where that
    is not 1 (dataset by dataset where they differ), lest a 1.0 there read as perfect scaling."""
    if set(bases.values()) <= {1}:
        return name
    if len(set(bases.values())) == 1:
        return f"{name} (speed-up vs P = {next(iter(bases.values()))})"
    return f"{name} (speed-up vs " + ", ".join(f"P = {base} on {dataset}" for dataset, base in bases.items()) + ")"


def plot_scaling(scaling: pd.DataFrame, stem: Path) -> None:
    """Epoch-time bars per variant with each variant's speed-up as a line, one panel per
    dataset (the paper's Figs. 9/10); one legend below the panels, each variant's bar and
    line in its :func:`variant_styles` style; a variant's speed-up relative to a P other
    than 1 is named in the legend, and a P at which any run was oversubscribed is marked
    under its tick. Where the table has the spreads (``epoch_seconds_sd``, ``speedup_sd``),
    bars and lines carry them as error bars; the lines are drawn in front of the bars.

    Args:
        scaling: the ``scaling`` table.
        stem: the figure files' path without suffix (:func:`save_figure`).

    Raises:
        SuperGCNError: a file cannot be written, or the disk filled.
    """
    styles = variant_styles(scaling["variant"])
    names = shown_names(scaling)
    labels = {variant: _speedup_label(names[variant], {dataset: int(rows["speedup_base_P"].min()) for dataset, rows in
                                                 scaling[scaling["variant"] == variant].groupby("dataset", sort=False)})
              for variant in styles}
    figure, panels = _panels(scaling, list(labels.values()))
    handles = {}
    for ax, dataset in panels:
        data = scaling[scaling["dataset"] == dataset]
        process_counts = sorted(data["P"].unique())
        variants = list(dict.fromkeys(data["variant"]))
        x, width = _bar_positions(len(process_counts), len(variants))
        speed = ax.twinx()
        # The twin axes' lines in front of the other axes' bars, which they would hide behind.
        speed.set_zorder(ax.get_zorder() + 1)
        speed.patch.set_visible(False)
        for k, variant in enumerate(variants):
            rows = data[data["variant"] == variant].set_index("P").reindex(process_counts)
            style = styles[variant]
            bars = ax.bar(x + (k - (len(variants) - 1) / 2) * width, rows["epoch_seconds"], width,
                          yerr=rows.get("epoch_seconds_sd"), error_kw={"elinewidth": 0.8, "capsize": 2},
                          label=labels[variant], color=style.color, hatch=style.hatch, edgecolor="black",
                          linewidth=0.5)
            line = speed.errorbar(x, rows["speedup"], yerr=rows.get("speedup_sd"), color=style.color,
                                  marker=style.marker, linestyle=style.linestyle, markeredgecolor="black",
                                  markeredgewidth=0.5, elinewidth=0.8, capsize=2).lines[0]
            line.set_label(labels[variant])
            handles.setdefault(variant, (bars, line))
        oversubscribed = [p for p in process_counts if data.loc[data["P"] == p, "oversubscribed"].eq(True).any()]
        ax.set_xticks(x, [f"{p}\noversubscribed" if p in oversubscribed else str(p) for p in process_counts])
        ax.set_xlabel("processes P")
        ax.set_ylabel("epoch time (s), bars")
        bases = set(data["speedup_base_P"])
        speed.set_ylabel("speed-up vs P = 1, lines" if bases == {1} else
                         f"speed-up vs P = {bases.pop()}, lines" if len(bases) == 1 else
                         "speed-up vs P = 1 or the P after a variant's name, lines")
        ax.set_title(dataset)
    shared_legend(figure, list(handles.values()), [labels[variant] for variant in handles],
                  title="variant: epoch time (bar), speed-up (line)", handlelength=3)
    save_figure(figure, stem)


#: The most panels in a row of the breakdown figure, which has one per dataset and variant.
BREAKDOWN_COLUMNS = 5


def plot_breakdown(breakdown: pd.DataFrame, stem: Path) -> None:
    """The slowest rank's seconds per phase, stacked, per P, one panel per dataset and variant
    in rows of at most :data:`BREAKDOWN_COLUMNS` (the paper's Fig. 12, its ``other`` drawn
    as its parts), the phases' legend below the panels.

    Args:
        breakdown: the ``breakdown`` table.
        stem: the figure files' path without suffix (:func:`save_figure`).

    Raises:
        SuperGCNError: a file cannot be written, or the disk filled.
    """
    groups = list(dict.fromkeys(zip(breakdown["dataset"], breakdown["variant"])))
    names = shown_names(breakdown)
    columns = min(len(groups), BREAKDOWN_COLUMNS)
    rows_of_panels = -(-len(groups) // columns)
    width = max(3.2 * columns, 6)
    height = 3.6 * rows_of_panels + legend_inches(len(DETAIL), legend_columns(DETAIL, width))
    figure, axes = pyplot().subplots(rows_of_panels, columns, figsize=(width, height), squeeze=False,
                                     layout="constrained")
    for ax, (dataset, variant) in zip(axes.flat, groups):
        rows = breakdown[(breakdown["dataset"] == dataset) & (breakdown["variant"] == variant)].sort_values("P")
        bottom = np.zeros(len(rows))
        # The paper's "other" drawn as its parts (dense, elementwise, ...): what a user can act on.
        for k, phase in enumerate(DETAIL):
            values = rows[f"{phase}_seconds"].to_numpy()
            ax.bar([str(p) for p in rows["P"]], values, bottom=bottom, label=phase, hatch=HATCHES[k % len(HATCHES)],
                   edgecolor="black", linewidth=0.5)
            bottom += values
        ax.set_title(f"{dataset}\n{names[variant]}", fontsize="small")
        ax.set_xlabel("processes P")
    for ax in axes.flat[len(groups):]:
        ax.set_axis_off()
    for ax in axes[:, 0]:
        ax.set_ylabel("seconds per epoch (slowest rank)")
    shared_legend(figure, *axes[0][0].get_legend_handles_labels(), title="phase")
    save_figure(figure, stem)


def plot_accuracy_curves(runs: pd.DataFrame, stem: Path) -> None:
    """Test accuracy of every variant at one P (:func:`curve_process_count`; its first seed)
    against the epoch (top row) and against the training seconds until then (bottom row,
    the paper's Fig. 11 question: which variant gets there first in time, not only in
    epochs); each variant in its :func:`variant_styles` style, one legend below the panels.
    Each panel's title says which P of the dataset's it shows and why.

    Args:
        runs: the ``runs`` table (its ``metrics`` column names the files read).
        stem: the figure files' path without suffix (:func:`save_figure`).

    Raises:
        SuperGCNError: a metrics file cannot be read, or a figure file written.
    """
    datasets = _datasets(runs)
    styles = variant_styles(runs["variant"])
    names = shown_names(runs)
    width = 6 * len(datasets)
    height = 8 + legend_inches(len(styles), legend_columns(styles, width))
    figure, axes = pyplot().subplots(2, len(datasets), figsize=(width, height), squeeze=False, layout="constrained")
    handles = {}
    for column, dataset in enumerate(datasets):
        data = runs[runs["dataset"] == dataset]
        shown_p, which = curve_process_count(data)
        for variant in dict.fromkeys(data.loc[data["P"] == shown_p, "variant"]):
            chosen = data[(data["variant"] == variant) & (data["P"] == shown_p)].sort_values("seed").iloc[0]
            curve = accuracy_curve(chosen["metrics"])
            style = styles[variant]
            for ax, x in zip(axes[:, column], ("epoch", "seconds")):
                # Markers every tenth of the line's length: on every epoch they would hide it.
                line, = ax.plot(curve[x], 100 * curve["test_acc"], label=names[variant], color=style.color,
                                marker=style.marker, linestyle=style.linestyle, markevery=0.1,
                                markeredgecolor="black", markeredgewidth=0.5)
                handles.setdefault(variant, line)
        for ax, label in zip(axes[:, column], ("epoch", "training seconds (epoch times summed)")):
            ax.set_xlabel(label)
            ax.set_ylabel("test accuracy (%)")
            ax.set_title(f"{dataset}, {which}; each variant's first seed", fontsize="medium")
    shared_legend(figure, list(handles.values()), [names[variant] for variant in handles], title="variant")
    save_figure(figure, stem)


def curve_process_count(runs: pd.DataFrame) -> tuple[int, str]:
    """The P whose runs the accuracy curves show, and the words that say so: the largest P
    whose ranks had cores of their own, since against seconds an oversubscribed run's curve
    measures the wait for a core; the largest P, flagged, where every P was oversubscribed
    (or the runs' files do not say).

    Args:
        runs: one dataset's rows of the ``runs`` table.

    Returns:
        ``(P, "P = 2 of 1, 2, 4 (the largest not oversubscribed)")`` or the like.
    """
    counts = sorted(int(p) for p in runs["P"].unique())
    crowded = {int(p) for p in runs.loc[runs["oversubscribed"].astype(str).eq("True"), "P"]}
    unknown = {int(p) for p in runs.loc[runs["oversubscribed"].isna(), "P"]}
    fitting = [p for p in counts if p not in crowded | unknown]
    chosen = max(fitting) if fitting else counts[-1]
    words = f"P = {chosen}" + (f" of {', '.join(map(str, counts))}" if len(counts) > 1 else "")
    if chosen in crowded:
        return chosen, words + " (oversubscribed: the seconds include the wait for a core)"
    if chosen in unknown:
        return chosen, words + " (oversubscribed or not: the runs' files do not say)"
    return chosen, words + (" (the largest not oversubscribed)" if chosen != counts[-1] else "")


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


def plot_memory(scaling: pd.DataFrame, stem: Path) -> None:
    """The largest rank's peak resident memory against P, one line per variant in its
    :func:`variant_styles` style, one panel per dataset (memory is not time: an oversubscribed
    P counts as any other here, and is not marked).

    Args:
        scaling: the ``scaling`` table.
        stem: the figure files' path without suffix (:func:`save_figure`).

    Raises:
        SuperGCNError: a file cannot be written, or the disk filled.
    """
    styles = variant_styles(scaling["variant"])
    names = shown_names(scaling)
    figure, panels = _panels(scaling, [names[variant] for variant in styles])
    handles = {}
    for ax, dataset in panels:
        data = scaling[scaling["dataset"] == dataset]
        for variant, rows in data.groupby("variant", sort=False):
            rows = rows.sort_values("P")
            style = styles[variant]
            (line,) = ax.plot(rows["P"], rows["peak_memory_gib"], color=style.color, marker=style.marker,
                              linestyle=style.linestyle, markeredgecolor="black", markeredgewidth=0.5)
            handles.setdefault(variant, line)
        process_counts = sorted(data["P"].unique())
        ax.set_xscale("log", base=2)
        ax.set_xticks(process_counts, [str(p) for p in process_counts])
        ax.set_xlabel("processes P")
        ax.set_ylabel("peak resident memory of the largest rank (GiB)")
        ax.set_ylim(bottom=0)
        ax.set_title(dataset)
    shared_legend(figure, list(handles.values()), [names[variant] for variant in handles], title="variant")
    save_figure(figure, stem)


#: Each figure of :data:`supergcn.naming.FIGURES` and the function that draws it from its table.
PLOTS = {"scaling": plot_scaling, "breakdown": plot_breakdown, "accuracy_curves": plot_accuracy_curves,
         "volume": plot_volume, "memory": plot_memory}


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
