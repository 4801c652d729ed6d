"""docs/own-graph.md as printed: its code writes a graph of 10,000 nodes as NumPy files,
its commands take it by hand through prepare, partition, plan, training at P = 2 and the
tables, and its overlay runs it as a study; and what a study's config may say of it."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from conftest import BIN, REPO, copy_workflow, snakemake, snakemake_each, snakemake_environment

PAGE = (REPO / "docs" / "own-graph.md").read_text()


def blocks(language: str) -> list[str]:
    """The page's fenced blocks of ``language`` (``bash``, or a code-block's ``python``, ``yaml``)."""
    return re.findall(rf"```(?:\{{code-block\}} )?{language}\n(?::caption: \S+\n\n)?(.*?)```", PAGE, re.S)


def environment(home) -> dict[str, str]:
    """The reader's shell: their home, the venv not yet on PATH (the page puts it there)."""
    return {**os.environ, "HOME": str(home), "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def by_hand(tmp_path_factory):
    """The page's example run by hand in a home of its own: the work folder and the output."""
    home = tmp_path_factory.mktemp("home")
    setup, steps, study = blocks("bash")
    (python,) = blocks("python")
    (home / "my-graph").mkdir()
    (home / "my-graph" / "make_graph.py").write_text(python)
    # The page's first block runs in the repository root and enters the work folder.
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", setup + steps], cwd=REPO, env=environment(home),
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return home, home / "my-graph", result.stdout


def test_the_pages_code_writes_the_files_and_the_steps_run_by_hand(by_hand):
    _, work, output = by_hand
    assert sorted(path.name for path in work.glob("*.np?")) == ["edges.npy", "features.npy", "labels.npy", "split.npz"]
    (printed,) = re.findall(r"```text\n(prepared my-graph: .*)\n```", PAGE)
    assert printed in output.splitlines()
    meta = json.loads((work / "graphs" / "my-graph" / "meta.json").read_text())
    assert meta["num_nodes"] == 10_000 and meta["provenance"]["edge_layout"] == "2 x E"
    assert (work / "runs" / "my-graph" / "P2" / "hybrid-fp32-nolp" / "seed0.jsonl").is_file()
    accuracy = pd.read_csv(work / "tables" / "accuracy.csv")
    # Learnable, not trivial: neighbours and features hint at the class (5 classes: 20 % by chance).
    assert list(accuracy["dataset"]) == ["my-graph"] and 30 < accuracy["test_acc_mean"].iloc[0] < 95


@pytest.fixture(scope="module")
def study(by_hand, tmp_path_factory):
    """The page's overlay, saved where it says, run by the page's command in a copy of the workflow."""
    home, work, _ = by_hand
    (overlay,) = blocks("yaml")
    (work / "my-graph.yaml").write_text(overlay)
    workdir = copy_workflow(tmp_path_factory.mktemp("study") / "wf")
    (command,) = [line for line in blocks("bash")[2].splitlines() if line.startswith("snakemake ")]
    env = {**environment(home), "PATH": f"{BIN}:{os.environ['PATH']}"}
    result = subprocess.run(["bash", "-c", command], cwd=workdir, env=env, capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return workdir, env, command


def test_the_pages_study_trains_every_variant_at_every_process_count(study, by_hand):
    workdir, _, _ = study
    overlay = yaml.safe_load(blocks("yaml")[0])
    scaling = pd.read_csv(workdir / "results" / "my-graph" / "tables" / "scaling.csv")
    assert sorted(set(zip(scaling["dataset"], scaling["P"]))) == [("my-graph", 1), ("my-graph", 2)]
    assert scaling["variant"].nunique() == len(overlay["variants"])
    # The study read the same files as the steps by hand: the very graph.
    prepared = json.loads((workdir / "data" / "graphs" / "my-graph" / "meta.json").read_text())
    assert prepared["hash"] == json.loads((by_hand[1] / "graphs" / "my-graph" / "meta.json").read_text())["hash"]


def planned(study) -> str:
    workdir, env, command = study
    result = subprocess.run(["bash", "-c", command + " -n"], cwd=workdir, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_a_changed_file_prepares_the_graph_again(study, by_hand):
    assert "Nothing to be done" in planned(study)
    edges = by_hand[1] / "edges.npy"
    changed = np.load(edges)
    changed[:, 0] = [1, 2]
    np.save(edges, changed)
    plan = planned(study)
    assert re.search(r"^prepare\s+1$", plan, re.M) and re.search(r"^train\s+4$", plan, re.M), plan


def test_a_mistyped_file_fails_the_study_in_one_line_though_its_results_exist(study, tmp_path):
    """The issue's case: ``labels: ~/my-graph/label.npy`` in a study that has run. Snakemake
    would find every output present and do nothing; the config's check names the file."""
    workdir, env, command = study
    assert (workdir / "results" / "my-graph" / "tables" / "scaling.csv").is_file()
    overlay = Path(env["HOME"]) / "my-graph" / "my-graph.yaml"
    mistyped = tmp_path / "mistyped.yaml"
    mistyped.write_text(overlay.read_text().replace("labels.npy", "label.npy"))
    assert "~/my-graph/my-graph.yaml" in command
    result = subprocess.run(["bash", "-c", command.replace("~/my-graph/my-graph.yaml", str(mistyped))], cwd=workdir,
                            env=env, capture_output=True, text=True, timeout=300)
    errors = [line for line in (result.stderr + result.stdout).splitlines() if "error:" in line]
    assert result.returncode != 0 and "Nothing to be done" not in result.stdout
    assert len(errors) == 1 and "own_datasets.my-graph.labels: ~/my-graph/label.npy does not exist" in errors[0], \
        errors


def write_overlay(tmp_path, **values):
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "overlay.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


FILES = {"edges": "e.npy", "features": "f.npy", "labels": "l.npy"}


#: Overlays naming a dataset wrongly, each with the message of the one error line it ends in.
MISNAMED = [
    ({"own_datasets": {"my-graph": FILES}, "datasets": ["mygraph"]},
     'datasets.0: "mygraph" is neither a dataset `supergcn prepare` knows nor one own_datasets declares (my-graph)'),
    ({"datasets": ["mygraph"]}, '"mygraph" is neither a dataset `supergcn prepare` knows nor one own_datasets '
                                "declares (it declares none)"),
    ({"own_datasets": {"cora": FILES}, "datasets": ["cora"]}, 'own_datasets: "cora" cannot name a graph of your own'),
    ({"own_datasets": {"my graph": FILES}}, 'own_datasets: "my graph" cannot name a graph of your own'),
    ({"own_datasets": {"g": {"edges": "e.npy", "features": "f.npy"}}, "datasets": ["g"]},
     "own_datasets.g: 'labels' is a required property"),
    ({"own_datasets": {"g": FILES}, "datasets": ["synthetic-tiny"], "training_by_dataset": {"h": {"epochs": 2}}},
     'training_by_dataset: "h" is neither a dataset'),
]


@pytest.fixture(scope="module")
def misnamed_dry_runs(tmp_path_factory):
    """The dry run of each overlay of :data:`MISNAMED` in the repository, forked from one
    started Snakemake (:func:`conftest.snakemake_each`)."""
    root = tmp_path_factory.mktemp("misnamed")
    commands = []
    for index, (overlay, _) in enumerate(MISNAMED):
        path = write_overlay(root / f"overlay{index}", **overlay)
        commands.append((["-n", "--configfiles", "config/config.yaml", path], snakemake_environment(), REPO))
    return snakemake_each(commands, root / "output")


@pytest.mark.parametrize("overlay, message", MISNAMED)
def test_a_study_names_only_datasets_it_knows(overlay, message, misnamed_dry_runs):
    result = misnamed_dry_runs[MISNAMED.index((overlay, message))]
    assert result.returncode != 0 and "Job stats" not in result.stdout
    errors = [line for line in (result.stderr + result.stdout).splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith("supergcn config: error: ") and message in errors[0], errors


def test_a_declared_graph_is_prepared_from_its_files_wherever_the_study_names_it(tmp_path):
    """In datasets, training_by_dataset and the perf study alike; a built-in dataset keeps its raw_root."""
    overlay = write_overlay(tmp_path, own_datasets={"g": {role: f"~/{name}" for role, name in
                                                          {**FILES, "split": "s.npz"}.items()}},
                            datasets=["g", "synthetic-tiny"], training_by_dataset={"g": {"epochs": 2}},
                            perf={"datasets": ["g"], "local": {"dataset": "g"}})
    for name in (*FILES.values(), "s.npz"):
        (tmp_path / name).write_bytes(b"")
    result = snakemake("-n", "-p", "--forceall", "--configfiles", "config/config.yaml", overlay, cwd=REPO,
                       env_extra={"HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-3000:]
    commands = [line for line in result.stdout.splitlines() if "supergcn.cli prepare" in line]
    assert len(commands) == 2
    (own,) = [line for line in commands if "--name g " in line]
    assert f"--edges {tmp_path}/e.npy --features {tmp_path}/f.npy --labels {tmp_path}/l.npy --split {tmp_path}/s.npz " \
        in own
    assert "--raw-root" not in own
    assert any("prepare synthetic-tiny --raw-root data/raw " in line for line in commands)
