"""The study's figures read the files they are given, and only those."""

from pathlib import Path

import pandas as pd
import pytest

from supergcn.errors import SuperGCNError
from supergcn.naming import FIGURES, OPTIONAL_TABLES, TABLES
from supergcn.report.figures import PLOTS, read_tables, runs_with_metrics


def test_every_declared_figure_has_its_drawing_and_a_declared_table():
    assert list(PLOTS) == list(FIGURES)
    assert {figure.table for figure in FIGURES.values()} <= set(TABLES)


def write_tables(directory, names):
    directory.mkdir(exist_ok=True)
    for name in names:
        pd.DataFrame({"dataset": ["g"]}).to_csv(directory / f"{name}.csv", index=False)
    return [directory / f"{name}.csv" for name in names]


def test_tables_are_read_by_their_names_and_an_optional_one_may_be_left_out(tmp_path):
    required = [name for name in dict.fromkeys(f.table for f in FIGURES.values()) if name not in OPTIONAL_TABLES]
    assert set(read_tables(write_tables(tmp_path, required))) == set(required)


@pytest.mark.parametrize("paths, message", [
    (lambda tmp: write_tables(tmp, ["runs", "scaling"]), "the breakdown table is not among the tables given"),
    (lambda tmp: write_tables(tmp, ["runs", "scaling", "breakdown", "accuracy"]), "accuracy.csv is not one of"),
    (lambda tmp: [*write_tables(tmp, ["runs", "scaling", "breakdown"]), tmp / "runs.csv"], "or is given twice"),
    (lambda tmp: [*write_tables(tmp, ["runs", "scaling"]), tmp / "breakdown.csv"], "breakdown.csv not found"),
])
def test_tables_that_cannot_be_drawn_from_are_refused(tmp_path, paths, message):
    with pytest.raises(SuperGCNError, match=message):
        read_tables(paths(tmp_path))


def test_the_runs_metrics_files_are_the_ones_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.jsonl").write_text("{}\n")
    (tmp_path / "b.jsonl").write_text("{}\n")
    runs = pd.DataFrame({"metrics": ["a.jsonl", str(tmp_path / "b.jsonl")]})
    given = runs_with_metrics(runs, [tmp_path / "a.jsonl", "b.jsonl"])
    assert list(given["metrics"]) == [str(tmp_path / "a.jsonl"), "b.jsonl"]
    with pytest.raises(SuperGCNError, match="names 1 metrics file.* not given, b.jsonl the first"):
        runs_with_metrics(pd.DataFrame({"metrics": ["a.jsonl", "b.jsonl"]}), ["a.jsonl"])
    with pytest.raises(SuperGCNError, match="c.jsonl not found — run its training job first"):
        runs_with_metrics(runs, ["a.jsonl", "b.jsonl", "c.jsonl"])


def test_the_scaling_figure_names_a_base_p_other_than_1_and_marks_oversubscribed_p(tmp_path, monkeypatch):
    """Read back as ``supergcn figures`` reads it: a variant scaled from P = 2 is labelled so,
    lest its speed-up of 1 there read as perfect scaling; P = 4 shared cores."""
    from supergcn.report import figures

    pd.DataFrame({"dataset": "g", "variant": ["a", "a", "b", "b"], "P": [1, 4, 2, 4],
                  "epoch_seconds": [4.0, 2.0, 3.0, 2.0], "speedup_base_P": [1, 1, 2, 2],
                  "speedup": [1.0, 2.0, 1.0, 1.5], "oversubscribed": ["False", "True", "", "True"]}
                 ).to_csv(tmp_path / "scaling.csv", index=False)
    drawn = {}
    monkeypatch.setattr(figures, "save_figure", lambda figure, stem: drawn.setdefault("figure", figure))
    figures.plot_scaling(pd.read_csv(tmp_path / "scaling.csv"), tmp_path / "scaling")
    bars = drawn["figure"].axes[0]
    assert bars.get_legend_handles_labels()[1] == ["a", "b (speed-up vs P = 2)"]
    assert [label.get_text() for label in bars.get_xticklabels()] == ["1", "2", "4\noversubscribed"]


def test_the_memory_figure_draws_each_variants_peak_against_p(tmp_path, monkeypatch):
    """One line per variant, through its peaks at its P, on a panel per dataset; P on a log2
    axis with a tick at each P studied."""
    from supergcn.report import figures

    table = pd.DataFrame({"dataset": "g", "variant": ["a", "a", "a", "b", "b"], "P": [2, 4, 8, 2, 8],
                          "peak_memory_gib": [4.0, 2.5, 1.5, 3.0, 1.0]})
    drawn = {}
    monkeypatch.setattr(figures, "save_figure", lambda figure, stem: drawn.setdefault("figure", figure))
    figures.plot_memory(table, tmp_path / "memory")
    (ax,) = [axes for axes in drawn["figure"].axes if axes.lines]
    assert [list(line.get_xdata()) for line in ax.lines] == [[2, 4, 8], [2, 8]]
    assert [list(line.get_ydata()) for line in ax.lines] == [[4.0, 2.5, 1.5], [3.0, 1.0]]
    assert [label.get_text() for label in ax.get_xticklabels()] == ["2", "4", "8"]
    assert ax.get_title() == "g"


#: Display names of the paper-comparison study's nine variants, as long as they get.
NINE_VARIANTS = ["SuperGCN w/ comm optimizations", "SuperGCN FP32", "SuperGCN Int2 + LP", "DistGNN (cd-0)",
                 "DistGNN (cd-5)", "AdaQP", "BNS-GCN (p = 0.1)", "BNS-GCN (p = 0.01)", "PipeGCN"]


def nine_variant_scaling() -> pd.DataFrame:
    """Two datasets, nine variants at P = 1, 2, 4 and 8 (PipeGCN from P = 2), speed-ups that
    rise to the top right of the panel, where a legend inside would sit."""
    rows = []
    for dataset in ("products", "reddit"):
        for k, variant in enumerate(NINE_VARIANTS):
            base = 2 if variant == "PipeGCN" else 1
            for p in (1, 2, 4, 8):
                if p >= base:
                    rows.append({"dataset": dataset, "variant": variant, "P": p, "epoch_seconds": (10 + k) / p,
                                 "speedup_base_P": base, "speedup": p / base, "oversubscribed": p == 8})
    return pd.DataFrame(rows)


def test_nine_variants_get_one_legend_outside_every_panel_and_a_colour_and_marker_each(tmp_path, monkeypatch):
    from matplotlib.colors import to_rgba

    from supergcn.report import figures

    drawn = {}
    save = figures.save_figure
    monkeypatch.setattr(figures, "save_figure", lambda figure, stem: drawn.setdefault("figure", figure))
    figures.plot_scaling(nine_variant_scaling(), tmp_path / "scaling")
    figure = drawn["figure"]
    figure.canvas.draw()  # lays the figure out (constrained layout) where the saved files have it
    renderer = figure.canvas.get_renderer()
    (legend,) = figure.legends
    assert all(ax.get_legend() is None for ax in figure.axes)
    assert [text.get_text() for text in legend.get_texts()] == [*NINE_VARIANTS[:-1], "PipeGCN (speed-up vs P = 2)"]
    box = legend.get_window_extent(renderer)
    for ax in figure.axes:
        assert not box.overlaps(ax.get_window_extent(renderer)), ax.get_title()
    # Within the figure: nothing of it cut off at the canvas's edge.
    assert figure.bbox.x0 <= box.x0 and box.x1 <= figure.bbox.x1 and figure.bbox.y0 <= box.y0
    from matplotlib.container import BarContainer

    panels = [ax for ax in figure.axes if any(isinstance(c, BarContainer) for c in ax.containers)]
    twins = [ax for ax in figure.axes if ax.get_lines()]
    assert len(panels) == len(twins) == 2
    for bars, speed in zip(panels, twins):
        assert speed.get_zorder() > bars.get_zorder(), "the speed-up lines are drawn in front of the bars"
        lines = speed.get_lines()
        assert [line.get_label() for line in lines] == [text.get_text() for text in legend.get_texts()]
        # Told apart by colour and marker; and by marker and line style alone, as in greyscale.
        assert len({(to_rgba(line.get_color()), line.get_marker()) for line in lines}) == 9
        assert len({(line.get_marker(), str(line.get_linestyle())) for line in lines}) == 9
        assert len({line.get_marker() for line in lines}) == 9
        assert len({container.patches[0].get_hatch() for container in bars.containers
                    if isinstance(container, BarContainer)}) == 9
    save(figure, tmp_path / "scaling")
    assert (tmp_path / "scaling.png").stat().st_size > 0 and (tmp_path / "scaling.pdf").stat().st_size > 0


def test_a_base_p_that_differs_by_dataset_is_named_for_each_in_the_shared_legend(tmp_path, monkeypatch):
    from supergcn.report import figures

    drawn = {}
    monkeypatch.setattr(figures, "save_figure", lambda figure, stem: drawn.setdefault("figure", figure))
    figures.plot_scaling(pd.DataFrame({"dataset": ["g", "g", "h", "h", "h"], "variant": ["a", "a", "a", "b", "b"],
                                       "P": [2, 4, 1, 1, 2], "epoch_seconds": 1.0, "speedup_base_P": [2, 2, 1, 1, 1],
                                       "speedup": 1.0, "oversubscribed": False}), tmp_path / "scaling")
    (legend,) = drawn["figure"].legends
    assert [text.get_text() for text in legend.get_texts()] == ["a (speed-up vs P = 2 on g, P = 1 on h)", "b"]


def test_figures_name_variants_as_the_tables_do(tmp_path, monkeypatch):
    """A published configuration by its paper's name; two variants that share one each with
    its label beside it; in the scaling legend, a breakdown panel's title and an accuracy
    curve's legend alike."""
    from supergcn.report import figures

    shown = figures.shown_names(pd.DataFrame({"variant": [
        "pre-fp32-nolp-cd-5", "hybrid-adaptive-lp", "hybrid-fp32-nolp-mop", "post-fp32-nolp-mop", "hybrid-int2-nolp",
        "hybrid-int2-lp"]}))
    assert shown == {"pre-fp32-nolp-cd-5": "DistGNN (cd-5)", "hybrid-adaptive-lp": "AdaQP w/ LP",
                     "hybrid-fp32-nolp-mop": "MixGCN [hybrid-fp32-nolp-mop]",
                     "post-fp32-nolp-mop": "MixGCN [post-fp32-nolp-mop]", "hybrid-int2-nolp": "hybrid-int2-nolp",
                     "hybrid-int2-lp": "SuperGCN w/ comm optimizations"}
    drawn = {}
    monkeypatch.setattr(figures, "save_figure", lambda figure, stem: drawn.setdefault(Path(stem).name, figure))
    figures.plot_scaling(pd.DataFrame({"dataset": "g", "variant": ["pre-fp32-nolp-cd-5", "hybrid-int2-lp"], "P": 1,
                                       "epoch_seconds": 1.0, "speedup_base_P": 1, "speedup": 1.0,
                                       "oversubscribed": False}), tmp_path / "scaling")
    (legend,) = drawn["scaling"].legends
    assert [text.get_text() for text in legend.get_texts()] == ["DistGNN (cd-5)", "SuperGCN w/ comm optimizations"]
    figures.plot_breakdown(pd.DataFrame({"dataset": "g", "variant": ["post-fp32-nolp-pipe"], "P": [2],
                                         **{f"{phase}_seconds": [0.1] for phase in figures.DETAIL}}),
                           tmp_path / "breakdown")
    assert drawn["breakdown"].axes[0].get_title() == "g\nPipeGCN"
    # A table's own name wins: runs whose options are not the method as published.
    assert figures.shown_names(pd.DataFrame({"variant": ["hybrid-adaptive-lp"] * 2, "name": "hybrid-adaptive-lp"})) == {
        "hybrid-adaptive-lp": "hybrid-adaptive-lp"}


def test_scaling_bars_and_lines_carry_their_spread_and_the_axis_names_the_base_p(tmp_path, monkeypatch):
    from matplotlib.container import BarContainer, ErrorbarContainer

    from supergcn.report import figures

    drawn = {}
    monkeypatch.setattr(figures, "save_figure", lambda figure, stem: drawn.setdefault("figure", figure))
    figures.plot_scaling(pd.DataFrame({"dataset": "g", "variant": "a", "P": [1, 2], "epoch_seconds": [2.0, 1.2],
                                       "epoch_seconds_sd": [0.1, 0.3], "speedup_base_P": 1, "speedup": [1.0, 1.67],
                                       "speedup_sd": [0.0, 0.4], "oversubscribed": False}), tmp_path / "scaling")
    bars, speed = drawn["figure"].axes[:2]
    (container,) = [c for c in bars.containers if isinstance(c, BarContainer)]
    segments = container.errorbar.lines[2][0].get_segments()
    assert [round(segment[1][1] - segment[0][1], 6) for segment in segments] == [0.2, 0.6], "± one sd"
    (line,) = [c for c in speed.containers if isinstance(c, ErrorbarContainer)]
    assert [round(s[1][1] - s[0][1], 6) for s in line.lines[2][0].get_segments()] == [0.0, 0.8]
    assert speed.get_ylabel() == "speed-up vs P = 1, lines"


@pytest.mark.parametrize("oversubscribed, shown, words", [
    ([False, False, True], 2, "P = 2 of 1, 2, 4 (the largest not oversubscribed)"),
    ([False, False, False], 4, "P = 4 of 1, 2, 4"),
    ([True, True, True], 4, "P = 4 of 1, 2, 4 (oversubscribed: the seconds include the wait for a core)"),
    ([False, False, None], 2, "P = 2 of 1, 2, 4 (the largest not oversubscribed)"),
    (["True", "True", ""], 4, "P = 4 of 1, 2, 4 (oversubscribed or not: the runs' files do not say)"),
])
def test_the_accuracy_curves_show_the_largest_p_with_cores_of_its_own_and_say_which(oversubscribed, shown, words):
    from supergcn.report.figures import curve_process_count

    runs = pd.DataFrame({"P": [1, 2, 4], "oversubscribed": oversubscribed})
    if "" in oversubscribed:  # as read back from runs.csv: an empty field
        runs["oversubscribed"] = runs["oversubscribed"].replace("", None)
    assert curve_process_count(runs) == (shown, words)
