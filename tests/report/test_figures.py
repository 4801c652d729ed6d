"""The study's figures read the files they are given, and only those."""

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
