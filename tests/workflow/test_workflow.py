"""The Snakemake pipeline run: a tiny study's outputs and what each kind of edit reruns, a
run interrupted and resumed, the report and the lint (what it plans: test_dry_runs.py)."""

import contextlib
import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from supergcn.naming import FIGURES, PERF_FIGURES, PERF_TABLES, TABLES
from supergcn.variants import Variant

from conftest import BIN, REPO, SNAKEMAKE, copy_workflow, planned_jobs, snakemake, train_jobs

#: The tiny study of .test/config/config.yaml, an overlay of config/config.yaml.
TINY = yaml.safe_load((REPO / ".test" / "config" / "config.yaml").read_text())
TINY_RESULTS = TINY["results_root"]


@pytest.fixture(scope="module")
def finished_study(tmp_path_factory):
    """A tiny study run to completion in a copy of the workflow and the package."""
    root = tmp_path_factory.mktemp("study")
    workdir = copy_workflow(root / "wf")
    shutil.copytree(REPO / "supergcn", root / "pkg" / "supergcn")
    (workdir / "config" / "config.yaml").write_text(
        yaml.safe_dump({**yaml.safe_load((REPO / "config" / "config.yaml").read_text()), **TINY}))
    env = {"PYTHONPATH": str(root / "pkg")}
    result = snakemake("--profile", REPO / "workflow/profiles/local", "--cores", 2, cwd=workdir, env_extra=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return workdir, root / "pkg" / "supergcn", env


def dry_run(study, *extra):
    workdir, _, env = study
    result = snakemake("-n", "--profile", REPO / "workflow/profiles/local", *extra, cwd=workdir, env_extra=env)
    assert result.returncode == 0, result.stderr
    return planned_jobs(result.stdout)


@contextlib.contextmanager
def edited_config(workdir, change):
    """The study's config changed by ``change(config)`` while the block runs, then restored."""
    path = workdir / "config" / "config.yaml"
    original = path.read_text()
    config = yaml.safe_load(original)
    change(config)
    path.write_text(yaml.safe_dump(config))
    try:
        yield
    finally:
        path.write_text(original)


def test_outputs_of_the_study_exist_and_are_readable(finished_study):
    workdir, _, _ = finished_study
    tables = workdir / TINY_RESULTS / "tables"
    assert sorted(path.name for path in tables.iterdir()) == sorted(
        f"{table}.{ext}" for table in TABLES for ext in ("csv", "md", "tex"))
    assert all(path.stat().st_size > 0 for path in tables.iterdir())
    # The default targets, 0.95 and 0.99 of the best accuracy, each reached by some run; and
    # on the test split DistGNN-MB's convergence, within a point of the P = 1 run's final accuracy.
    reached = pd.read_csv(workdir / TINY_RESULTS / "tables" / "time_to_accuracy.csv")
    assert set(reached["target"]) == {"0.95 x best", "0.99 x best", "P = 1 final - 1 pt"}
    assert set(reached["split"]) == {"val", "test"}
    assert set(reached[reached["target"] == "P = 1 final - 1 pt"]["split"]) == {"test"}
    assert (reached.groupby(["split", "target"])["epoch_mean"].min() >= 1).all()
    assert sorted(path.name for path in (workdir / TINY_RESULTS / "figures").iterdir()) == sorted(
        f"{figure}.{ext}" for figure in FIGURES for ext in ("png", "pdf"))
    for figure in FIGURES:
        png = (workdir / TINY_RESULTS / "figures" / f"{figure}.png").read_bytes()
        assert png.startswith(b"\x89PNG")
        assert (workdir / TINY_RESULTS / "figures" / f"{figure}.pdf").read_bytes().startswith(b"%PDF")
    # The data steps log under logs/, the study's own jobs under its results_root.
    for log in ("logs/prepare/synthetic-tiny.log", f"{TINY_RESULTS}/logs/tables.log",
                f"{TINY_RESULTS}/logs/train/synthetic-tiny/P2/hybrid-fp32-nolp/seed0.log"):
        assert (workdir / log).exists()
    # Every step's cost: Snakemake's benchmark records, and the manifests' figures in a table.
    for record in ("logs/benchmarks/prepare/synthetic-tiny.tsv", "logs/benchmarks/partition/synthetic-tiny/P2.tsv",
                   "logs/benchmarks/plan/synthetic-tiny/P2/hybrid.tsv",
                   f"{TINY_RESULTS}/logs/benchmarks/train/synthetic-tiny/P2/hybrid-fp32-nolp/seed0.tsv"):
        assert pd.read_csv(workdir / record, sep="\t")["s"].iloc[0] > 0
    steps = pd.read_csv(workdir / TINY_RESULTS / "tables" / "preprocessing.csv")
    partition = json.loads((workdir / "data" / "partitions" / "synthetic-tiny" / "P2" / "partition.json").read_text())
    row = steps[(steps["step"] == "partition (metis)") & (steps["P"] == 2)].iloc[0]
    assert row["seconds"] == pytest.approx(partition["seconds"])
    assert row["peak_gib"] == pytest.approx(partition["peak_memory_mib"] / 1024)
    assert pd.isna(row["bytes_per_entry"]), "a tiny graph's peak is the interpreter's, not per entry"
    assert "prepare" in set(steps["step"]) and "plan (hybrid)" in set(steps["step"])
    perf = workdir / TINY_RESULTS / "perf"
    assert sorted(path.stem for path in (perf / "tables").glob("*.csv")) == sorted(PERF_TABLES)
    assert all(path.stat().st_size > 0 for path in (perf / "tables").glob("*.csv"))
    assert sorted(path.stem for path in (perf / "figures").glob("*.png")) == sorted(PERF_FIGURES)
    for figure in PERF_FIGURES:
        assert (perf / "figures" / f"{figure}.png").read_bytes().startswith(b"\x89PNG")
    validation = pd.read_csv(perf / "tables" / "perf_validation.csv")
    assert len(validation) == 3 * 2  # pre, post, hybrid x FP32, Int2 at P = 2
    assert (validation["measured_ms"] > 0).all() and validation["relative_error"].notna().all()
    assert validation["oversubscribed"].dtype == bool
    hybrid = pd.read_csv(perf / "tables" / "perf_hybrid.csv")
    assert list(hybrid["P"]) == [2, 4] * 2 and list(hybrid["model"]) == ["gat"] * 2 + ["sage"] * 2
    assert (hybrid["min_pre_post_over_hybrid"] >= 1).all()
    # GAT on its weighted plan: the fewest bytes of the three, though not always the fewest rows.
    gat = hybrid[hybrid["model"] == "gat"]
    assert (gat["epoch_mib_hybrid"] <= gat[["epoch_mib_pre", "epoch_mib_post"]].min(axis=1)).all()


def test_nothing_changed_means_nothing_to_do(finished_study):
    assert dry_run(finished_study) == {}


def test_training_parameter_change_reruns_training_only(finished_study):
    with edited_config(finished_study[0], lambda c: c["training"].update(lr=0.02)):
        assert dry_run(finished_study) == {"train_settings": 2, "train": 2, "tables": 1, "figures": 1, "all": 1}


def test_a_mixgcn_variant_asks_for_its_copy_of_the_adjacency_besides(finished_study):
    """Each rank of a MixGCN job asks for execution.mem_mb_per_rank (2,000 MB) and its copy
    of the graph at its peak while built, 24 B per node and entry and 64 KiB, in whole MiB;
    a job of the partition variant asks for the 2,000 MB alone."""
    workdir, _, env = finished_study
    meta = json.loads((workdir / "data" / "graphs" / "synthetic-tiny" / "meta.json").read_text())
    copy_mib = math.ceil((24 * (meta["num_nodes"] + 1 + meta["num_edges_directed"]) + 65536) / 2**20)
    mop = {"strategy": "hybrid", "bits": 32, "label_propagation": False, "parallelism": "mop"}
    with edited_config(workdir, lambda c: c["variants"].append(mop)):
        result = snakemake("-n", "-p", "--forceall", "--until", "train", "--profile",
                           REPO / "workflow/profiles/local", cwd=workdir, env_extra=env)
    assert result.returncode == 0, result.stderr
    requests = {(job["wildcards"]["variant"], int(job["wildcards"]["P"])): int(job["resources"]["mem_mb"])
                for job in train_jobs(result.stdout)}
    mop_rank = 2000 + copy_mib
    assert requests == {("hybrid-fp32-nolp", 1): 2000, ("hybrid-fp32-nolp", 2): 2 * 2000,
                        ("hybrid-fp32-nolp-mop", 1): mop_rank, ("hybrid-fp32-nolp-mop", 2): 2 * mop_rank}
    commands = [line for line in result.stdout.splitlines() if "cli train" in line]
    assert len(commands) == 4 and all("--memory-per-rank 2000 " in line for line in commands)


def test_an_option_no_job_reads_reruns_nothing(finished_study):
    """The tiny study has no adaptive variant: AdaQP's lambda reaches none of its jobs."""
    with edited_config(finished_study[0], lambda c: c["training"].update(adaptive_weight=0.9)):
        assert dry_run(finished_study) == {}


def test_moving_the_study_to_another_machine_reruns_nothing(finished_study):
    """The launcher, Fujitsu MPI's rank files, the memory a rank may use and where
    checkpoints are kept are the machine's: a finished study moved to another keeps its runs."""
    def moved(config):
        config["execution"].update(mpi="srun --mpi=pmi2", rank_output="-std-proc {log}", mem_mb_per_rank=6000)
        config["checkpoint_root"] = "elsewhere/checkpoints"

    with edited_config(finished_study[0], moved):
        assert dry_run(finished_study) == {}


def test_partition_parameter_change_reruns_partition_and_downstream(finished_study):
    with edited_config(finished_study[0], lambda c: c["partition"].update(seed=3)):
        # P = 1, 2 (training) and 4 (perf study) are partitioned again: hybrid plans at
        # every P, and pre and post at P = 2 for the model-vs-measurement check, whose
        # exchanges bench comm times beside the sweeps this machine's profile is fitted to.
        # GAT's predictions read plans of their own (its weighted cover) at P = 2 and 4.
        assert dry_run(finished_study) == {"partition": 3, "plan": 5, "plan_weighted": 2, "train": 2, "tables": 1,
                                           "figures": 1, "bench_comm": 1, "local_machine": 1, "predict": 4,
                                           "perf_tables": 1, "perf_figures": 1, "all": 1}


def test_kernel_source_change_reruns_training(finished_study):
    _, package, _ = finished_study
    source = package / "distributed" / "rank_operators.py"
    original = source.read_text()
    source.write_text(original + "\n_EDITED = 1\n")
    try:
        # Training and the measured exchanges run this code, so this machine's profile,
        # fitted in the same job as those, and its predictions follow.
        assert dry_run(finished_study) == {"train": 2, "tables": 1, "figures": 1, "bench_comm": 1,
                                           "local_machine": 1, "predict": 4, "perf_tables": 1, "perf_figures": 1,
                                           "all": 1}
    finally:
        source.write_text(original)


def test_a_documentation_edit_reruns_nothing(finished_study):
    _, package, _ = finished_study
    source = package / "distributed" / "rank_operators.py"
    original = source.read_text()
    source.write_text(original.replace('"""One rank\'s boundary exchange', '"""A rank\'s boundary exchange', 1)
                      + "\n# a comment\n")
    try:
        assert source.read_text() != original and dry_run(finished_study) == {}
    finally:
        source.write_text(original)


def test_machine_profile_change_reruns_only_its_predictions(finished_study):
    with edited_config(finished_study[0], lambda c: c["machines"]["fugaku"].update(latency_us=2.0)):
        assert dry_run(finished_study) == {"machine_profile": 1, "predict": 4, "perf_tables": 1,
                                           "perf_figures": 1, "all": 1}


def rank_processes(workdir: Path) -> dict[int, int]:
    """MPI rank -> pid of the `supergcn train` processes running in ``workdir`` (Linux /proc)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            environment = (entry / "environ").read_bytes().split(b"\0")
            cwd = (entry / "cwd").resolve()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if b"supergcn.cli" in command and b"train" in command and cwd == workdir.resolve():
            for variable in environment:
                if variable.startswith(b"PMI_RANK="):
                    found[int(variable.split(b"=", 1)[1])] = int(entry.name)
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the rank processes through /proc")
def test_an_interrupted_run_resumes_on_the_next_invocation_to_the_same_weights(tmp_path):
    """Ctrl-C during training, then SIGKILL of one rank mid-epoch in the rerun: each ends
    the job (the kill quickly, with a clear message) and leaves no run but the last good
    checkpoint, and each next invocation of the same Snakemake target resumes from the last
    checkpoint; the last reaches the very weights of an uninterrupted run (the parameter
    hashes of every rank) and keeps no checkpoint."""
    import signal
    import time

    workdir = copy_workflow(tmp_path / "wf")
    config = {**yaml.safe_load((REPO / "config" / "config.yaml").read_text()), **TINY, "process_counts": [2]}
    # Enough epochs to be interrupted twice after a checkpoint (every 5), well before the end.
    epochs = 200
    config["training"] = {**TINY["training"], "hidden": 128, "epochs": epochs, "checkpoint_every": 5}
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    run = workdir / f"{TINY_RESULTS}/runs/synthetic-tiny/P2/hybrid-fp32-nolp/seed0.jsonl"
    log = workdir / TINY_RESULTS / "logs/train/synthetic-tiny/P2/hybrid-fp32-nolp/seed0.log"
    checkpoints = workdir / "data/checkpoints/synthetic-tiny/P2/hybrid-fp32-nolp"
    profile = ["--profile", REPO / "workflow/profiles/local", "--cores", 2]
    command = [SNAKEMAKE, str(run.relative_to(workdir)), *map(str, profile)]
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "OMP_NUM_THREADS": "1"}

    def checkpointed_after() -> int:
        """At most the epoch of the last whole checkpoint (0: none yet). A checkpoint writes
        the ranks' states, then rank 0's file, and only then does rank 1 delete its state of
        the one before: the oldest it keeps is complete."""
        if not checkpoints.exists() or not list(checkpoints.glob("seed0-*.pt")):
            return 0
        states = checkpoints.glob("seed0-*.pt.epoch*.rank1")
        return min((int(re.search(r"\.epoch(\d+)\.rank", path.name).group(1)) for path in states), default=0)

    def started_until_checkpoint(after: int, **popen) -> subprocess.Popen:
        """The target's run, once it has written a checkpoint past epoch ``after``."""
        started = subprocess.Popen(command, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   text=True, **popen)
        deadline = time.monotonic() + 240
        while checkpointed_after() <= after and time.monotonic() < deadline and started.poll() is None:
            time.sleep(0.1)
        assert checkpointed_after() > after, "training did not reach a checkpoint"
        return started

    straight = snakemake(run.relative_to(workdir), *profile, cwd=workdir)
    assert straight.returncode == 0, straight.stderr[-3000:]
    uninterrupted = read_summary(run)
    run.unlink()
    for kept in checkpoints.glob("seed0-*.finished.*"):  # else the rerun restores the finished run
        kept.unlink()

    first = started_until_checkpoint(0, start_new_session=True)
    os.killpg(first.pid, signal.SIGINT)  # Ctrl-C: the whole foreground process group
    first.communicate(timeout=120)
    assert not run.exists() and checkpointed_after() >= 5

    second = started_until_checkpoint(checkpointed_after())
    ranks = rank_processes(workdir)
    assert set(ranks) == {0, 1}, "the ranks were not found"
    os.kill(ranks[1], signal.SIGKILL)
    killed_at = time.monotonic()
    output, _ = second.communicate(timeout=120)
    ended_after = time.monotonic() - killed_at
    print(f"the job ended {ended_after:.2f} s after rank 1 was killed")
    assert second.returncode != 0 and ended_after < 60
    assert "supergcn train: error: the MPI job ended with status" in output
    assert "a rank was killed" in log.read_text() and not run.exists()
    first_resumed_after = int(re.search(r"resuming from checkpoint .* after epoch (\d+)", log.read_text()).group(1))
    assert first_resumed_after >= 5 and list(checkpoints.glob("seed0-*.pt")), "the last good checkpoint must survive"

    third = snakemake(run.relative_to(workdir), *profile, cwd=workdir)
    assert third.returncode == 0, third.stderr[-3000:]
    resumed_after = int(re.search(r"resuming from checkpoint .* after epoch (\d+)", log.read_text()).group(1))
    records = [yaml.safe_load(line) for line in run.read_text().splitlines()][1:-1]
    assert resumed_after > first_resumed_after and [e["epoch"] for e in records] == list(range(1, epochs + 1))
    assert [e["epoch"] for e in records if e["warm_up"]] == [1, first_resumed_after + 1, resumed_after + 1]
    resumed = read_summary(run)
    assert resumed["parameter_hash_per_rank"] == uninterrupted["parameter_hash_per_rank"]
    assert resumed["test_acc_at_best_val"] == uninterrupted["test_acc_at_best_val"]
    kept = sorted(path.name.split(".pt.")[1] for path in checkpoints.glob("seed0-*"))
    assert kept == ["finished.json", "finished.jsonl"], "a finished run keeps its metrics, not its checkpoint"


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the rank processes through /proc")
def test_a_run_interrupted_as_it_finishes_is_kept_not_trained_again(tmp_path):
    """Ctrl-C reaches Snakemake after a run has written its metrics but before its job has
    ended (a launcher that lingers once the ranks are done holds it there). The next
    invocation runs the job again, as Snakemake counts its output incomplete, and gets the
    very file back (same SHA-256) without training an epoch."""
    import hashlib
    import signal
    import time

    workdir = copy_workflow(tmp_path / "wf")
    lingering, ended, hold = tmp_path / "lingering-mpiexec", tmp_path / "ranks-ended", tmp_path / "hold"
    lingering.write_text(f'#!/bin/sh\nmpiexec "$@"\nstatus=$?\n'
                         f'if [ -e {hold} ]; then touch {ended}; sleep 300; fi\nexit $status\n')
    lingering.chmod(0o755)
    hold.touch()
    default = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config = {**default, **TINY, "process_counts": [1], "execution": {**default["execution"], "mpi": str(lingering)}}
    config["training"] = {**TINY["training"], "epochs": 4, "checkpoint_every": 2}
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    variant = Variant.from_config(TINY["variants"][0]).name
    run = workdir / f"{TINY_RESULTS}/runs/synthetic-tiny/P1/{variant}/seed0.jsonl"
    log = workdir / TINY_RESULTS / f"logs/train/synthetic-tiny/P1/{variant}/seed0.log"
    command = [SNAKEMAKE, str(run.relative_to(workdir)), "--profile", str(REPO / "workflow/profiles/local"),
               "--cores", "2"]
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "OMP_NUM_THREADS": "1"}
    started = subprocess.Popen(command, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, start_new_session=True, preexec_fn=ctrl_c_as_in_a_terminal)
    deadline = time.monotonic() + 300
    while not ended.exists() and time.monotonic() < deadline and started.poll() is None:
        time.sleep(0.1)
    assert ended.exists(), started.communicate(timeout=60)[0][-3000:]
    # Ctrl-C only once the launcher's sleep runs: a SIGINT between the wrapper's touch and
    # its sleep left the shell's interrupt pending until a sleep that never got it ended.
    while not holding_sleep(started.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    finished = hashlib.sha256(run.read_bytes()).hexdigest()
    os.killpg(started.pid, signal.SIGINT)  # Ctrl-C: the whole foreground process group
    output, _ = started.communicate(timeout=120)
    assert started.returncode != 0, output[-3000:]

    hold.unlink()
    again = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "already finished" in log.read_text() and "epoch 1:" not in log.read_text(), log.read_text()
    assert hashlib.sha256(run.read_bytes()).hexdigest() == finished


def ctrl_c_as_in_a_terminal() -> None:
    """SIGINT at its default in the started Snakemake, as a terminal's shell starts it: a
    suite run in the background (or under a launcher that ignores it) hands the ignore down
    to Snakemake, its jobs and their shells, and the Ctrl-C would reach none of them."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def holding_sleep(group: int) -> bool:
    """Whether a ``sleep 300`` runs in process group ``group`` (found through /proc)."""
    for entry in Path("/proc").iterdir():
        try:
            if (entry / "cmdline").read_bytes() == b"sleep\x00300\x00" and os.getpgid(int(entry.name)) == group:
                return True
        except (OSError, ValueError):
            continue
    return False


def read_summary(path: Path) -> dict:
    import json

    return json.loads(path.read_text().splitlines()[-1])


def test_lint_is_clean():
    result = snakemake("--lint")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Congratulations" in result.stdout + result.stderr


def test_the_html_report_holds_the_tables_and_the_figures(finished_study):
    workdir, _, env = finished_study
    result = snakemake("--report", "report.zip", cwd=workdir, env_extra=env, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    import zipfile

    with zipfile.ZipFile(workdir / "report.zip") as archive:
        names = archive.namelist()
        for table in (*TABLES, *PERF_TABLES):
            assert any(name.endswith(f"/{table}.csv") for name in names), table
        for figure in (*FIGURES, *PERF_FIGURES):
            assert any(name.endswith(f"/{figure}.png") for name in names), figure
        scaling = next(name for name in names if name.endswith("/scaling.csv"))
        assert archive.read(scaling) == (workdir / TINY_RESULTS / "tables" / "scaling.csv").read_bytes()
        index = next(name for name in names if name.endswith("report.html"))
        page = archive.read(index).decode()
    assert "Tables" in page and "Performance model" in page


def test_ruff_is_clean():
    """`make lint`'s first half: pyflakes, pycodestyle and import order (pyproject.toml)."""
    result = subprocess.run([str(BIN / "ruff"), "check", "."], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
