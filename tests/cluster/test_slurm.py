"""The slurm profile on a real single-node Slurm 22.05 with accounting, started for this
module by tests/cluster/slurm/throwaway-slurm (root and apt needed; skips otherwise).

Each test names the failure of the profile it covers: (1) status queries that fail and
leave Snakemake idle forever, (2) one-rank jobs refused by the executor, (3) rank jobs no
node can hold, pending forever, (4) --default-resources dropping the runtime, (5) an
account or partition that does not exist, (6) srun starting singletons.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import BIN, REPO, copy_workflow, snakemake, snakemake_each, snakemake_environment

SCRIPT = REPO / "tests" / "cluster" / "slurm" / "throwaway-slurm"
#: The script's status for "Slurm cannot be started here".
CANNOT_START = 77
#: The default study's process counts that this machine's cores hold (P = 2 at least), one
#: rank a core as a Slurm site runs them; the node is declared with as many CPUs. Run
#: oversubscribed under srun (P = 4 on 2 cores), the P = 4 job hung before its first line
#: until its time limit in two of four suite runs here (P = 1 and 2 beside it finished),
#: which oversubscribed mpiexec jobs have not done: left for a machine where it can be
#: watched, and kept out of the suite.
PROCESS_COUNTS = [P for P in yaml.safe_load((REPO / "config" / "config.yaml").read_text())["process_counts"]
                  if P <= max(len(os.sched_getaffinity(0)), 2)]
#: One variant: what Slurm runs differs by P, not by variant (the workflow's tests cover those).
VARIANTS = [{"strategy": "hybrid", "bits": 2, "label_propagation": False}]
RUNTIME_MINUTES = 10


def profile(study: str) -> list:
    """The slurm profile with the study overlay ``study``, polling job status every second."""
    return ["--profile", REPO / "workflow" / "profiles" / "slurm", "--configfiles", "config/config.yaml",
            "config/slurm.yaml", study, "--slurm-init-seconds-before-status-checks", 1,
            "--seconds-between-status-checks", 1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """SLURM_CONF and PATH of a running throwaway cluster; stopped (and checked to have
    left nothing running) at the end of the module."""
    state = tmp_path_factory.mktemp("slurm")
    started = subprocess.run([SCRIPT, "start", state, "--cpus", str(max(PROCESS_COUNTS))], capture_output=True,
                             text=True, timeout=600)
    if started.returncode == CANNOT_START:
        pytest.skip(started.stderr.strip())
    assert started.returncode == 0, started.stderr
    env = {"SLURM_CONF": started.stdout.strip().split("=", 1)[1], "PATH": f"{BIN}:{os.environ['PATH']}"}
    yield env
    stopped = subprocess.run([SCRIPT, "stop", state], capture_output=True, text=True, timeout=120)
    assert stopped.returncode == 0, stopped.stderr


def slurm(env, *command) -> str:
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **env}, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def jobs_known(env) -> list[dict]:
    """Every job and step sacct knows, newest last."""
    fields = ["JobID", "JobName", "State", "Timelimit", "NTasks", "AllocCPUS"]
    lines = slurm(env, "sacct", "--allusers", "--noheader", "--parsable2", "--format", ",".join(fields)).splitlines()
    return [dict(zip(fields, line.split("|"))) for line in lines]


def write_study(workdir: Path, name: str, epochs: int = 3, **execution) -> str:
    """The overlay ``<name>.yaml`` of a tiny study writing under results/<name>; returns its file name."""
    config = {
        "results_root": f"results/{name}", "datasets": ["synthetic-tiny"], "process_counts": PROCESS_COUNTS,
        "seeds": [0],
        "variants": VARIANTS, "perf": {"datasets": []},
        "training": {**yaml.safe_load((REPO / "config" / "config.yaml").read_text())["training"],
                     "num_layers": 2, "hidden": 16, "epochs": epochs, "checkpoint_every": 0},
        "execution": {"mpi": "srun --mpi=pmi2 --overlap", "threads_per_rank": 1, "ranks_per_node": max(PROCESS_COUNTS),
                      "runtime_minutes": RUNTIME_MINUTES, "mem_mb_per_rank": 1000, **execution},
    }
    (workdir / f"{name}.yaml").write_text(yaml.safe_dump(config))
    return f"{name}.yaml"


@pytest.fixture(scope="module")
def study(cluster, tmp_path_factory):
    """The default process counts, Int2, run through `snakemake --profile slurm`
    with the account and partition given on the command line (which replaces the profile's
    default-resources)."""
    workdir = copy_workflow(tmp_path_factory.mktemp("study") / "wf")
    before = len(jobs_known(cluster))
    start = time.monotonic()
    result = snakemake(*profile(write_study(workdir, "study")), "--default-resources", "slurm_account=supergcn",
                       "slurm_partition=debug",
                       cwd=workdir, env_extra=cluster, timeout=900)
    seconds = time.monotonic() - start
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    print(f"\nthe study took {seconds:.0f} s under Slurm")
    return workdir, jobs_known(cluster)[before:]


def test_the_default_process_counts_train_under_slurm_with_p_ranks_each(study):
    """(2) P = 1 runs; (6) P > 1 runs as one world of P ranks (srun --mpi=pmi2), at each of
    the default study's process counts the machine's cores hold (:data:`PROCESS_COUNTS`)."""
    workdir, _ = study
    runs = sorted((workdir / "results/study/runs/synthetic-tiny").glob("P*/*/seed0.jsonl"))
    assert len(runs) == len(PROCESS_COUNTS) * len(VARIANTS)
    for run in runs:
        records = [json.loads(line) for line in run.read_text().splitlines()]
        header, summary = records[0], records[-1]
        procs = int(run.parent.parent.name[1:])
        assert header["num_ranks"] == procs and len(header["hosts"]) == procs
        hashes = summary["parameter_hash_per_rank"]
        assert len(hashes) == procs and len(set(hashes)) == 1 and summary["identical_parameters"]
    accuracy = pd.read_csv(workdir / "results/study/tables/accuracy.csv")
    assert sorted(accuracy["P"].unique()) == sorted(PROCESS_COUNTS)
    assert set(accuracy["variant"]) == {"hybrid-int2-nolp"}
    scaling = pd.read_csv(workdir / "results/study/tables/scaling.csv")
    assert sorted(scaling["P"]) == sorted(PROCESS_COUNTS * len(VARIANTS)) and (scaling["epoch_seconds"] > 0).all()


def test_every_job_ran_as_a_slurm_job_with_its_runtime_and_rank_steps(study):
    """(4) --default-resources on the command line kept every job's time limit; the rank
    steps have P tasks (one-rank jobs: the executor's step plus the launcher's)."""
    _, jobs = study
    allocations = [job for job in jobs if "." not in job["JobID"]]
    assert allocations and all(job["State"] == "COMPLETED" for job in jobs), jobs
    assert {job["Timelimit"] for job in allocations} == {f"00:{RUNTIME_MINUTES:02d}:00"}
    python_steps = sorted(int(job["NTasks"]) for job in jobs if job["JobName"] == "python")
    for procs in PROCESS_COUNTS:
        assert python_steps.count(procs) >= len(VARIANTS)


def test_a_second_invocation_submits_nothing(study, cluster):
    workdir, _ = study
    before = len(jobs_known(cluster))
    again = snakemake(*profile("study.yaml"), "--default-resources", "slurm_account=supergcn", "slurm_partition=debug",
                      cwd=workdir, env_extra=cluster, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "Nothing to be done" in again.stdout + again.stderr
    assert len(jobs_known(cluster)) == before


def no_accounting(cluster, tmp_path) -> dict:
    """The cluster as a site without slurmdbd sees it: sacct refuses every query."""
    conf = Path(cluster["SLURM_CONF"])
    copy = tmp_path / "slurm.conf"
    copy.write_text(conf.read_text().replace("accounting_storage/slurmdbd", "accounting_storage/none"))
    return {**cluster, "SLURM_CONF": str(copy)}


#: Each refusal of the pre-flight check: the one line (or two) naming the setting to change.
REFUSALS = {
    "placeholders": ["slurm_account 'your_account' is not an account of user",
                     "slurm_partition 'your_partition' does not exist (partitions: debug)"],
    "threads": [f"needs 1 node(s) of {8 * max(PROCESS_COUNTS)} CPUs ({max(PROCESS_COUNTS)} ranks × 8 threads)",
                "lower execution.threads_per_rank or execution.ranks_per_node"],
    "memory": ["lower execution.mem_mb_per_rank or execution.ranks_per_node"],
    "no-accounting": ["`sacct` says: Slurm accounting storage is disabled",
                      "add `slurm-status-command: squeue` to the slurm profile"],
}


@pytest.fixture(scope="module")
def refused(cluster, tmp_path_factory):
    """The workflow run with each case of :data:`REFUSALS`, all at once, each in a copy of
    its own (none may submit a job), forked from one started Snakemake
    (:func:`conftest.snakemake_each`): (case: its run and folder, the jobs sacct knew
    before, and after)."""
    root = tmp_path_factory.mktemp("refused")
    commands, folders = [], {}
    for case in REFUSALS:
        folders[case] = copy_workflow(root / case)
        execution = {"threads": {"threads_per_rank": 8}, "memory": {"mem_mb_per_rank": 10**6}}.get(case, {})
        extra = ["--default-resources", "slurm_account=your_account", "slurm_partition=your_partition"] \
            if case == "placeholders" else []
        env = no_accounting(cluster, root) if case == "no-accounting" else cluster
        commands.append(([*profile(write_study(folders[case], case, **execution)), *extra],
                         snakemake_environment(env), folders[case]))
    before = len(jobs_known(cluster))
    runs = snakemake_each(commands, root / "output", timeout=120)
    return {case: (run, folders[case]) for case, run in zip(REFUSALS, runs)}, before, len(jobs_known(cluster))


@pytest.mark.parametrize("case", list(REFUSALS))
def test_the_pre_flight_check_refuses_with_one_line_per_problem_and_submits_nothing(refused, case):
    """(5) placeholder account and partition, (3) a job no node holds, (1) sacct without
    accounting: each one line naming the setting, before any submission."""
    runs, before, after = refused
    result, workdir = runs[case]
    errors = [line for line in (result.stdout + result.stderr).splitlines() if "error:" in line]
    assert result.returncode != 0
    assert all(line.startswith("supergcn slurm: error: ") and " — " in line for line in errors), errors
    assert len(errors) == (2 if case == "placeholders" else 1), errors
    for fragment in REFUSALS[case]:
        assert any(fragment in line for line in errors), (fragment, errors)
    assert after == before
    assert not (workdir / f"results/{case}").exists()


def test_without_accounting_squeue_passes_the_check_where_min_job_age_allows_it(cluster, tmp_path, monkeypatch):
    """(1) the fix the check proposes works: squeue status, with MinJobAge (300 s) at least
    3 initial intervals; with a longer interval the executor falls back to sacct."""
    from supergcn.cluster.slurm import check_cluster

    for name, value in no_accounting(cluster, tmp_path).items():
        monkeypatch.setenv(name, value)
    assert check_cluster([], "squeue", 1) == []
    assert check_cluster([], "squeue", 100) == []
    [problem] = check_cluster([], "squeue", 101)
    assert "slurm-init-seconds-before-status-checks at most 100" in problem
    [problem] = check_cluster([], None, 1)
    assert "accounting storage is disabled" in problem


def test_srun_without_an_mpi_plugin_is_named_and_fixed_in_one_line(study, cluster):
    """(6) bare `srun -n 2` (MpiDefault=none) starts two singletons: the error says so and
    gives the srun --mpi=pmi2 launch, printed once."""
    workdir, _ = study
    result = subprocess.run(
        ["srun", "-n", "2", str(BIN / "python"), "-m", "supergcn.cli", "train", "--graph", "data/graphs/synthetic-tiny",
         "--partition", "data/partitions/synthetic-tiny/P2", "--plan", "data/plans/synthetic-tiny/P2/hybrid",
         "--out", "lost.jsonl", "--epochs", "1"],
        cwd=workdir, capture_output=True, text=True, env={**os.environ, **cluster}, timeout=120)
    errors = [line for line in result.stderr.splitlines() if line.startswith("supergcn")]
    assert result.returncode != 0
    assert errors == ["supergcn train: error: srun started 2 separate single-process MPI jobs instead of one of 2 "
                      "ranks (Slurm's MpiDefault is none) — launch with `srun --mpi=pmi2 -n 2` (`srun --mpi=list` "
                      "shows the MPI plugins of your Slurm)"]
    assert not (workdir / "lost.jsonl").exists()


def test_a_job_the_scheduler_cancels_fails_the_run_instead_of_hanging(study, cluster):
    workdir, _ = study
    study_file = write_study(workdir, "cancelled", epochs=100_000)
    target = "results/cancelled/runs/synthetic-tiny/P2/hybrid-fp32-nolp/seed0.jsonl"
    env = {**os.environ, "OMP_NUM_THREADS": "1", **cluster}
    run = subprocess.Popen([str(BIN / "snakemake"), target, *map(str, profile(study_file))], cwd=workdir, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        running = []
        while not running and time.monotonic() < deadline and run.poll() is None:
            time.sleep(0.5)
            running = slurm(cluster, "squeue", "--noheader", "--states=RUNNING", "--format=%i").split()
        assert running, "the train job never started"
        slurm(cluster, "scancel", *running)
        cancelled = time.monotonic()
        # The executor's status interval grows by 10 s per round that sees no job end.
        output, _ = run.communicate(timeout=240)
        print(f"\nthe run failed {time.monotonic() - cancelled:.0f} s after the scancel")
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode != 0
    assert "CANCELLED" in output, output[-3000:]
    assert not (workdir / target).exists()
