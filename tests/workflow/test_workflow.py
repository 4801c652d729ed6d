"""The Snakemake pipeline: schema validation, profiles and rerun behaviour (dry runs)."""

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

from conftest import BIN, REPO, SNAKEMAKE, copy_workflow, snakemake, snakemake_each, snakemake_environment

#: A dry run of every job of the study, as if nothing were built: the checkout's own
#: results/ (after `make run`) must not change what a test of the plan sees.
FROM_SCRATCH = ("-n", "--forceall")


def planned_jobs(output: str) -> dict[str, int]:
    """The 'Job stats' table of a dry run: rule -> count."""
    match = re.search(r"Job stats:\njob\s+count\n[-\s]+\n(.*?)\ntotal", output, re.S)
    if match is None:
        return {}
    return {line.split()[0]: int(line.split()[1]) for line in match.group(1).strip().splitlines()}


def train_jobs(output: str) -> list[dict]:
    """Wildcards and resources of every train job a dry run lists."""
    jobs = []
    for block in output.split("rule train:")[1:]:
        wildcards = dict(kv.split("=") for kv in re.search(r"wildcards: (.*)", block).group(1).split(", "))
        resources = dict(kv.split("=", 1) for kv in re.search(r"resources: (.*)", block).group(1).split(", "))
        jobs.append({"wildcards": wildcards, "resources": resources})
    return jobs


def write_overlay(tmp_path, **values) -> Path:
    path = tmp_path / "overlay.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


#: The Snakemake runs of the tests below that depend on nothing another test does, each
#: registered beside its test by :func:`run_of`: name -> (arguments, config overlay,
#: variables added, whether it runs in a copy of the workflow).
RUNS: dict[str, tuple] = {}


def run_of(name: str, *arguments, overlay: dict | None = None, env: dict | None = None,
           in_copy: bool = False) -> str:
    """Register a run of :func:`snakemake_runs`.

    Args:
        name: what its test looks it up by.
        arguments: Snakemake's arguments.
        overlay: a config overlay written for the run and given after ``arguments``.
        env: variables the run adds to :func:`conftest.snakemake_environment`, ``{folder}``
            in a value standing for a folder of the run's own.
        in_copy: whether it runs in a copy of the workflow in that folder (else in the checkout).

    Returns:
        ``name``.
    """
    assert name not in RUNS, f"two runs named {name}"
    RUNS[name] = (arguments, overlay, env or {}, in_copy)
    return name


@pytest.fixture(scope="module")
def snakemake_runs(tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess, Path]]:
    """Every run of :data:`RUNS`, each in a folder of its own, forked from one started
    Snakemake (:func:`conftest.snakemake_each`): a dry run is mostly Snakemake's start-up.
    Returns name -> (the run, the folder it ran in)."""
    root = tmp_path_factory.mktemp("runs")
    commands, folders = [], []
    for index, (arguments, overlay, env, in_copy) in enumerate(RUNS.values()):
        folder = root / f"run{index}"
        folder.mkdir()
        cwd = copy_workflow(folder / "wf") if in_copy else REPO
        given = [*arguments, *([] if overlay is None else [write_overlay(folder, **overlay)])]
        added = {key: value.replace("{folder}", str(folder)) for key, value in env.items()}
        commands.append((given, snakemake_environment(added), cwd))
        folders.append(cwd if in_copy else folder)
    return {name: (run, folder) for name, run, folder in
            zip(RUNS, snakemake_each(commands, root / "output"), folders)}


# A 3-bit variant, a negative learning rate, a variant that cannot run and the old `model:`
# key are tests/cli/test_bad_inputs.py's config refusals, held to these checks and more.
@pytest.mark.parametrize("run, key", [
    (run_of(f"schema: {key}", "-n", "--configfiles", "config/config.yaml", overlay=override), key)
    for override, key in [({"process_counts": [0, 2]}, "process_counts"),
                          ({"variants": [{"strategy": "both", "bits": 32, "label_propagation": False}]}, "strategy"),
                          ({"datasets": ["ogbn-nope"]}, "datasets")]])
def test_schema_violations_fail_before_any_job(snakemake_runs, run, key):
    result, _ = snakemake_runs[run]
    assert result.returncode != 0
    errors = [line for line in (result.stderr + result.stdout).splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith("supergcn config: error: ") and key in errors[0]
    assert "Job stats" not in result.stdout


@pytest.mark.parametrize("run, message", [
    (run_of(f"config error {index}", "-n", "--configfiles", "config/config.yaml", overlay=override), message)
    for index, (override, message) in enumerate([
        ({"trainig": {}, "training": {"epoch": 3}}, "trainig: unknown key (did you mean training?); training.epoch: "
         "unknown key (did you mean training.epochs?) — fix it in your config file or overlay"),
        ({"speedup_baseline": "nope"}, "speedup_baseline 'nope' is not a variant of this study")])])
def test_a_config_error_is_its_line_alone(snakemake_runs, run, message):
    """Found by the schema or by the rules as they read the config: one line and status 2,
    none of Snakemake's lines about where in the workflow's code it was raised."""
    result, _ = snakemake_runs[run]
    assert result.returncode == 2
    lines = [line for line in (result.stdout + result.stderr).splitlines()
             if line.strip() and not line.startswith("Config file config/config.yaml is extended")]
    assert len(lines) == 1 and lines[0].startswith(f"supergcn config: error: {message}"), lines


TWO_STUDIES = [run_of(f"study {index}", *FROM_SCRATCH, "--configfiles", "config/config.yaml", *overlays)
               for index, overlays in enumerate([[], ["config/studies/paper-comparison-laptop.yaml"]])]


def test_two_studies_share_the_logs_of_the_data_steps_only(snakemake_runs):
    """Two overlays train the same graphs: each writes its jobs' logs and benchmark records
    of its own; only the steps they share (prepare, partition, plan: the same outputs)
    log to the same files."""
    logs = []
    for run in TWO_STUDIES:
        result, _ = snakemake_runs[run]
        assert result.returncode == 0, result.stderr
        assert planned_jobs(result.stdout).get("train", 0) > 0
        logs.append(set(re.findall(r"^\s+(?:log|benchmark): (\S+)", result.stdout, re.M)))
    shared = logs[0] & logs[1]
    assert shared and all(re.match(r"logs/(benchmarks/)?(prepare|partition|plan)/", path) for path in shared), \
        sorted(shared)


FUGAKU = run_of("fugaku", *FROM_SCRATCH, "--profile", "workflow/profiles/fugaku", "--configfiles",
                "config/config.yaml", "config/fugaku.yaml", overlay={"process_counts": [1, 4, 6, 16]})


def test_fugaku_profile_requests_nodes_and_processes_per_train_job(snakemake_runs):
    from supergcn.cluster.pjm import pjm_script, read_site

    result, _ = snakemake_runs[FUGAKU]
    assert result.returncode == 0, result.stderr
    jobs = train_jobs(result.stdout)
    assert sorted({int(j["wildcards"]["P"]) for j in jobs}) == [1, 4, 6, 16]
    site = read_site(REPO / "config" / "fugaku.yaml")
    for job in jobs:
        procs, resources = int(job["wildcards"]["P"]), job["resources"]
        assert int(resources["tasks"]) == procs
        assert int(resources["nodes"]) == math.ceil(procs / 4)
        assert int(resources["cpus_per_task"]) == 12
        script = pjm_script("job.sh", site, "t", int(resources["nodes"]), int(resources["tasks"]),
                            int(resources["cpus_per_task"]), int(resources["runtime"]), "logs").splitlines()
        assert f'#PJM -L "node={math.ceil(procs / 4)}"' in script
        assert f'#PJM --mpi "proc={procs}"' in script
        assert '#PJM --mpi "max-proc-per-node=4"' in script


# The docs name profiles by path: no profile in the user's config folder is needed or read.
NOTHING_INSTALLED = {"HOME": "{folder}", "XDG_CONFIG_HOME": "{folder}/.config"}
PROFILE_BY_PATH = [run_of(f"profile {profile}", *FROM_SCRATCH, "--profile", profile, env=NOTHING_INSTALLED)
                   for profile in ("workflow/profiles/fugaku", "fugaku")]


def test_a_profile_named_by_its_path_applies_with_nothing_installed(snakemake_runs):
    (result, _), (bare, _) = (snakemake_runs[run] for run in PROFILE_BY_PATH)
    assert result.returncode == 0, result.stderr
    assert "Using profile workflow/profiles/fugaku" in result.stdout + result.stderr
    assert train_jobs(result.stdout)[0]["resources"]["cpus_per_task"] == "12"
    assert bare.returncode != 0 and "no profile.yaml (or config.yaml) found" in bare.stderr


def test_no_default_workflow_profile_can_override_a_cluster_profile():
    # Snakemake 9 silently applies profiles/default (beside the Snakefile or in workflow/)
    # on top of --profile; the project ships none.
    for candidate in ("profiles/default", "workflow/profiles/default"):
        assert not (REPO / candidate).exists()


SLURM = run_of("slurm", *FROM_SCRATCH, "-p", "--profile", "workflow/profiles/slurm")


def test_slurm_profile_dry_run_launches_with_srun_pmi2_and_one_rank_jobs_without_mpi(snakemake_runs):
    # The SLURM executor refuses the `mpi` resource with one task; its srun needs --mpi=pmi2
    # where Slurm's MpiDefault is none, and SRUN_CPUS_PER_TASK since Slurm 22.05 (tests/cluster/test_slurm.py
    # runs all of it on a real Slurm).
    result, _ = snakemake_runs[SLURM]
    assert result.returncode == 0, result.stderr
    jobs = train_jobs(result.stdout)
    launcher = yaml.safe_load((REPO / "config" / "slurm.yaml").read_text())["execution"]["mpi"]
    assert launcher.startswith("srun --mpi=pmi2")
    assert {int(job["wildcards"]["P"]) for job in jobs} >= {1, 2}
    for job in jobs:
        procs, resources = int(job["wildcards"]["P"]), job["resources"]
        assert resources.get("mpi") == (launcher if procs > 1 else None)
        assert int(resources["tasks"]) == procs
        assert resources["cpus_per_task"] == "8" and resources["runtime"] == "60"
        assert re.search(rf"^Shell command: python -m supergcn.cli train --settings \S*/P{procs}/\S*settings.json .*"
                         rf"--out \S*/P{procs}/.* --threads 8 .*--launcher "
                         rf"'SRUN_CPUS_PER_TASK=8 {re.escape(launcher)} -n {procs}' ", result.stdout, re.M)


SLURM_RESOURCES = run_of("slurm resources", *FROM_SCRATCH, "--profile", "workflow/profiles/slurm",
                         "--default-resources", "slurm_account=a")


def test_overriding_default_resources_keeps_every_job_s_runtime(snakemake_runs):
    # --default-resources replaces a profile's whole list; runtime lives in the rules instead.
    result, _ = snakemake_runs[SLURM_RESOURCES]
    assert result.returncode == 0, result.stderr
    local = {"all", *(name for rules in (REPO / "workflow" / "rules").glob("*.smk")
                      for block in re.findall(r"^localrules:\n((?:    \w+,\n)+)", rules.read_text(), re.M)
                      for name in re.findall(r"\w+", block))}
    submitted = [block for block in result.stdout.split("\nrule ")[1:] if block.split(":")[0] not in local]
    assert {block.split(":")[0] for block in submitted} >= {"partition", "plan", "train", "bench_comm"}
    for block in submitted:
        assert "runtime=60" in block and "slurm_account=a" in block, block


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
    assert row["bytes_per_entry"] == pytest.approx(partition["peak_memory_mib"] * 2**20 / row["adjacency_entries"])
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


UNKNOWN_MACHINE = run_of("unknown machine", "-n", "--configfiles", "config/config.yaml",
                         overlay={"perf": {"machines": ["fugaku", "summit"]}})


def test_unknown_machine_name_is_reported(snakemake_runs):
    result, _ = snakemake_runs[UNKNOWN_MACHINE]
    assert result.returncode != 0
    assert "perf.machines names summit" in result.stderr + result.stdout


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
    assert not list(checkpoints.glob("seed0-*")), "a finished run keeps no checkpoint"


def read_summary(path: Path) -> dict:
    import json

    return json.loads(path.read_text().splitlines()[-1])


def test_lint_is_clean():
    result = snakemake("--lint")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Congratulations" in result.stdout + result.stderr


def settings_run(name: str, *configfiles, overlay: dict | None = None) -> str:
    """Register (:func:`run_of`) rule train_settings alone of the study of ``configfiles``
    (and ``overlay``), run in a copy of the workflow."""
    return run_of(name, "--cores", 1, "--until", "train_settings", "--configfiles",
                  *(REPO / path for path in configfiles), overlay=overlay, in_copy=True)


def study_settings(snakemake_runs, run: str) -> dict[str, dict]:
    """Every training job's settings file of :func:`settings_run`'s ``run``, by variant;
    the jobs of one variant must agree."""
    result, workdir = snakemake_runs[run]
    assert result.returncode == 0, result.stderr[-3000:]
    by_variant = {}
    for path in workdir.glob("results/**/*.settings.json"):
        by_variant.setdefault(path.parent.name, []).append(json.loads(path.read_text()))
    assert by_variant and all(settings == jobs[0] for jobs in by_variant.values() for settings in jobs)
    return {variant: jobs[0] for variant, jobs in by_variant.items()}


QUANTIZED_AND_LABELS = settings_run(
    "quantized and labels", "config/config.yaml",
    overlay={"variants": [{"strategy": "hybrid", "bits": 2, "label_propagation": True},
                          {"strategy": "hybrid", "bits": 32, "label_propagation": False}]})


def test_quantized_and_label_propagation_variants_reach_the_trainer(snakemake_runs):
    settings = study_settings(snakemake_runs, QUANTIZED_AND_LABELS)
    assert settings["hybrid-int2-lp"]["bits"] == 2 and settings["hybrid-int2-lp"]["label_rate"] == 0.62
    assert settings["hybrid-int2-lp"]["label_draw"] == "exact"
    assert settings["hybrid-fp32-nolp"]["label_rate"] == 0 and "label_draw" not in settings["hybrid-fp32-nolp"]
    assert not any(name.startswith("adaptive_") for variant in settings.values() for name in variant)
    assert settings["hybrid-fp32-nolp"]["epochs"] == 40 and settings["hybrid-fp32-nolp"]["model"] == "sage"


A_VARIANTS_MODEL = settings_run(
    "a variant's model", "config/config.yaml",
    overlay={"variants": [{"strategy": "post", "bits": 2, "label_propagation": False, "model": "gat"},
                          {"strategy": "post", "bits": 2, "label_propagation": False}]})


def test_a_variants_model_reaches_the_trainer_with_its_options(snakemake_runs):
    settings = study_settings(snakemake_runs, A_VARIANTS_MODEL)
    assert settings["post-int2-nolp-gat"]["model"] == "gat" and settings["post-int2-nolp-gat"]["heads"] == 4
    assert settings["post-int2-nolp"]["model"] == "sage" and "heads" not in settings["post-int2-nolp"]


INT2_ACCURACY = run_of("int2 accuracy", *FROM_SCRATCH, "--configfiles", "config/config.yaml",
                       "config/studies/int2-accuracy.yaml")


def test_int2_accuracy_study_plans_every_run(snakemake_runs):
    result, _ = snakemake_runs[INT2_ACCURACY]
    assert result.returncode == 0, result.stderr
    assert planned_jobs(result.stdout)["train"] == 4 * 4 * 4 * 5
    assert "results/int2-accuracy/tables/accuracy.md" in result.stdout


PAPER_COMPARISON = run_of("paper comparison", *FROM_SCRATCH, "-p", "--configfiles", "config/config.yaml",
                          "config/studies/paper-comparison.yaml")


def test_paper_comparison_study_runs_distgnn_and_adaptive_bits_beside_supergcn(snakemake_runs):
    result, _ = snakemake_runs[PAPER_COMPARISON]
    assert result.returncode == 0, result.stderr
    assert planned_jobs(result.stdout)["train"] == 11 * 2 * 3
    commands = [line for line in result.stdout.splitlines() if "supergcn.cli train" in line]
    distgnn = [c for c in commands if "pre-fp32-nolp-cd-5/" in c]
    assert distgnn and all("/hybrid " not in c and "/pre " in c for c in distgnn)
    # BNS-GCN and PipeGCN train on the post plan, as published.
    for variant in ("post-fp32-nolp-bns0.1/", "post-fp32-nolp-bns0.01/", "post-fp32-nolp-pipe/"):
        runs = [c for c in commands if variant in c]
        assert len(runs) == 2 * 3 and all("/post " in c for c in runs)
    # MixGCN's row blocks are the hybrid plan's parts; it is told the memory a rank may use.
    mixgcn = [c for c in commands if "hybrid-fp32-nolp-mop/" in c]
    assert len(mixgcn) == 2 * 3 and all("/hybrid " in c and "--memory-per-rank 2000 " in c for c in mixgcn)
    # DistGNN-MB samples the hybrid plan's parts; its settings file holds its batch.
    distgnn_mb = [c for c in commands if "hybrid-fp32-nolp-mb1000/" in c]
    assert len(distgnn_mb) == 2 * 3 and all("/hybrid " in c for c in distgnn_mb)
    tables = [line for line in result.stdout.splitlines() if "supergcn.cli tables" in line]
    assert tables and "--baseline pre-fp32-nolp-cd-5" in tables[0]


def test_the_distgnn_mb_studies_train_mini_batches_beside_full_batches(tmp_path):
    """Both studies' dry runs (forked from one started Snakemake): every dataset, P, variant
    and seed, the full-batch run beside DistGNN-MB's."""
    studies = {"distgnn-mb-accuracy": (["cora", "citeseer", "facebook"], [1, 4], "hybrid-fp32-nolp-mb32"),
               "distgnn-mb-epoch": (["synthetic-arxiv"], [1, 2, 3, 4], "hybrid-fp32-nolp-mb1000")}
    commands = [(["-n", "-p", "--forceall", "--configfiles", "config/config.yaml", f"config/studies/{study}.yaml"],
                 snakemake_environment(), REPO) for study in studies]
    for (study, (datasets, counts, minibatch)), result in zip(studies.items(), snakemake_each(commands, tmp_path)):
        assert result.returncode == 0, result.stderr
        seeds = len(yaml.safe_load((REPO / "config" / "studies" / f"{study}.yaml").read_text())["seeds"])
        trained = re.findall(r"cli train --settings \S+/runs/(\S+)/P(\d+)/(\S+)/seed\d+\.settings\.json",
                             result.stdout)
        assert sorted(set(trained)) == sorted((dataset, str(p), variant) for dataset in datasets for p in counts
                                              for variant in ("hybrid-fp32-nolp", minibatch))
        assert planned_jobs(result.stdout)["train"] == len(trained) == len(set(trained)) * seeds


MODELS = run_of("models", *FROM_SCRATCH, "-p", "--configfiles", "config/config.yaml", "config/studies/models.yaml")


def test_models_study_trains_each_model_on_its_own_plan(snakemake_runs):
    """config/studies/models.yaml: four models, FP32 and Int2, every strategy; hybrid GAT on
    a plan whose cover is weighed by GAT's row costs, the others on the fewest rows'."""
    result, _ = snakemake_runs[MODELS]
    assert result.returncode == 0, result.stderr
    assert planned_jobs(result.stdout)["train"] == 4 * 3 * 2 * 2
    assert planned_jobs(result.stdout)["plan_weighted"] == 2  # one per graph at P = 4
    commands = [line for line in result.stdout.splitlines() if "supergcn.cli train" in line]
    gat_hybrid = [c for c in commands if "/hybrid-fp32-nolp-gat/" in c or "/hybrid-int2-nolp-gat/" in c]
    assert len(gat_hybrid) == 4 and all("/P4/hybrid-gat " in c for c in gat_hybrid)
    assert all("/P4/hybrid " in c for c in commands if "/hybrid-fp32-nolp-gin/" in c)
    weighted = [line for line in result.stdout.splitlines() if "--strategy hybrid --model gat" in line]
    assert weighted and all("--num-layers 3 --hidden 256 --heads 4" in line for line in weighted)


PAPER_COMPARISON_SETTINGS = settings_run("paper comparison settings", "config/config.yaml",
                                         "config/studies/paper-comparison.yaml")


def test_the_paper_comparison_hands_its_jobs_the_schedules_and_adaptive_bits(snakemake_runs):
    settings = study_settings(snakemake_runs, PAPER_COMPARISON_SETTINGS)
    assert settings["pre-fp32-nolp-cd-5"]["schedule"] == "cd-5"
    adaptive = settings["hybrid-adaptive-lp"]
    assert adaptive["bits"] == "adaptive" and adaptive["adaptive_period"] == 20
    # Only MixGCN's jobs read the parallelism: the others' settings, and so their jobs, stay as they were.
    assert settings["hybrid-fp32-nolp-mop"]["parallelism"] == "mop"
    assert [name for name, job in settings.items() if "parallelism" in job] == ["hybrid-fp32-nolp-mop"]
    assert not any("memory_per_rank" in job for job in settings.values())
    # Only DistGNN-MB's read the mini-batch options: its batch, and its paper's settings.
    assert {key: settings["hybrid-fp32-nolp-mb1000"][key] for key in ("batch_size", "fanouts", "hec_push")} == {
        "batch_size": 1000, "fanouts": "5,10,15", "hec_push": 2000}
    assert [name for name, job in settings.items() if "batch_size" in job] == ["hybrid-fp32-nolp-mb1000"]


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


PREPOST = run_of("prepost", *FROM_SCRATCH, "--profile", "workflow/profiles/fugaku-prepost")


def test_the_prepost_profile_preprocesses_and_stops_before_training(snakemake_runs):
    result, _ = snakemake_runs[PREPOST]
    assert result.returncode == 0, result.stderr
    assert set(planned_jobs(result.stdout)) == {"prepare", "partition", "plan"}


TABLE2 = run_of("table 2", *FROM_SCRATCH, "-p", "--configfiles", "config/config.yaml",
                "config/studies/paper-table2.yaml")


def test_the_table2_study_plans_every_graph_at_every_process_count(snakemake_runs):
    """config/studies/paper-table2.yaml: the eight graphs of the paper's Table 2, the three
    that fit a node trained at Table 3's counts, the five largest partitioned, planned and
    predicted at the paper's, each with its own Table 2 settings."""
    study = yaml.safe_load((REPO / "config" / "studies" / "paper-table2.yaml").read_text())
    result, _ = snakemake_runs[TABLE2]
    assert result.returncode == 0, result.stderr
    jobs = planned_jobs(result.stdout)
    graphs = [*study["datasets"], *study["perf"]["datasets"]]
    assert len(set(graphs)) == 8 == jobs["prepare"] and set(graphs) == set(study["training_by_dataset"])
    perf = study["perf"]
    predicted = {(dataset, int(p)) for dataset, p in re.findall(r"perf predict --graph data/graphs/(\S+) .*?"
                                                                 r"data/partitions/\S+/P(\d+)", result.stdout)}
    assert predicted == {(dataset, p) for dataset in perf["datasets"]
                         for p in perf.get("process_counts_by_dataset", {}).get(dataset, perf["process_counts"])}
    # GAT beside SAGE, each on the plan it trains on: GAT's weighted cover, a plan of its own.
    models = re.findall(r"perf predict .*--model (\w+) ", result.stdout)
    assert sorted(set(models)) == sorted(perf["models"]) == ["gat", "sage"]
    assert models.count("gat") == models.count("sage") == len(predicted) == jobs["plan_weighted"]
    trained = {(dataset, int(p)) for dataset, p in re.findall(r"train --settings \S+ --graph data/graphs/(\S+) "
                                                              r"--partition data/partitions/\S+/P(\d+)", result.stdout)}
    assert trained == {(dataset, p) for dataset in study["datasets"] for p in study["process_counts"]}
    assert jobs["train"] == len(trained) * len(study["variants"])
    # UK-2007-05's own width (Table 2: 128) reaches its predictions; papers100M's learning rate its runs' config.
    assert re.search(r"perf predict --graph data/graphs/uk-2007-05 .*--hidden 128 ", result.stdout)
    assert not re.search(r"perf predict --graph data/graphs/uk-2007-05 .*--hidden 256 ", result.stdout)
    # The volume table counts each trained graph at its own width.
    widths = " ".join(f"{dataset}={study['training_by_dataset'][dataset]['hidden']}" for dataset in study["datasets"])
    assert re.search(rf"supergcn.cli tables .*--hidden-by-dataset {widths} ", result.stdout)


GIN = {"strategy": "post", "bits": 32, "label_propagation": False, "model": "gin"}


@pytest.mark.parametrize("run, training, gin_lr", [
    (settings_run(f"model defaults {training}", "config/config.yaml",
                  overlay={"variants": [GIN, {**GIN, "model": "sage"}], "training": training}), training, gin_lr)
    for training, gin_lr in [({}, 0.001), ({"lr": 0.02}, 0.02)]])
def test_a_models_own_defaults_reach_its_jobs_unless_the_config_sets_them(snakemake_runs, run, training, gin_lr):
    """GIN's card sets its own learning rate: its jobs train at it where no config file sets
    ``training.lr``; the other models keep the option's default, or the config's value."""
    settings = study_settings(snakemake_runs, run)
    assert settings["post-fp32-nolp-gin"]["lr"] == gin_lr
    assert settings["post-fp32-nolp"]["lr"] == training.get("lr", 0.01)
