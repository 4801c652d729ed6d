"""`snakemake --profile fugaku` end to end, through a PJM emulator on PATH that behaves as
Fugaku's guide describes pjsub / pjstat / pjdel and Fujitsu MPI's output files
(tests/cluster/pjm_emulator/pjm_emulator.py)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from conftest import REPO

BIN = Path(sys.executable).parent
EMULATOR = Path(__file__).parent / "pjm_emulator"
TINY = yaml.safe_load((REPO / ".test" / "config" / "config.yaml").read_text())
RESULTS = TINY["results_root"]
# Status queries every second, one pjstat listing per second: the test's pace, not a site's.
FAST = ["--cluster-generic-status-cmd", "supergcn pjm status --state-dir logs/pjm --missing-timeout 120 --max-age 1",
        "--seconds-between-status-checks", "1", "--latency-wait", "5"]


def emulator_env(state: Path, **extra) -> dict:
    return {**os.environ, "PATH": f"{EMULATOR}:{BIN}:{os.environ['PATH']}", "PJM_EMULATOR_DIR": str(state),
            "PJM_EMULATOR_PYTHON": sys.executable, "PJM_EMULATOR_MPIEXEC": str(BIN / "mpiexec"),
            "OMP_NUM_THREADS": "1", **extra}


def jobs(state: Path) -> dict:
    path = state / "jobs.json"
    return json.loads(path.read_text())["jobs"] if path.exists() else {}


def fugaku_workflow(root: Path) -> Path:
    """A copy of the workflow in ``root``/wf whose site file suits the emulator: the job
    environment is built by pjm.setup, as on Fugaku (pjsub passes none of the caller's on)."""
    workdir = root / "wf"
    workdir.mkdir()
    shutil.copy(REPO / "Snakefile", workdir)
    for folder in ("workflow", "config"):
        shutil.copytree(REPO / folder, workdir / folder)
    config = {**yaml.safe_load((REPO / "config" / "config.yaml").read_text()), **TINY}
    config["perf"] = {**TINY["perf"], "datasets": []}
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    site = yaml.safe_load((REPO / "config" / "fugaku.yaml").read_text())
    site["execution"].update(threads_per_rank=1, ranks_per_node=2, mem_mb_per_rank=500, runtime_minutes=10)
    site["pjm"]["setup"] = [f"export PATH={EMULATOR}:{BIN}:$PATH", f"export PYTHONPATH={REPO}",
                            "export OMP_NUM_THREADS=1"]
    (workdir / "config" / "fugaku.yaml").write_text(yaml.safe_dump(site))
    return workdir


def kill_left_running(state: Path) -> None:
    """Whatever a failing test left running must not run on beside the rest of the suite."""
    for job in jobs(state).values():
        if job.get("pgid"):
            try:
                os.killpg(job["pgid"], signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def fugaku(tmp_path):
    """:func:`fugaku_workflow` in the test's folder, and the emulator's state folder."""
    yield fugaku_workflow(tmp_path), tmp_path / "pjm"
    kill_left_running(tmp_path / "pjm")


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory):
    """The tiny study run through PJM to its scaling table in a :func:`fugaku_workflow` of
    its own, as it stood after the run: the workflow, the emulator's state, the run, the
    jobs PJM knew, the rank output files left, and the dry run of the same target. The
    interruption test trains on in it."""
    root = tmp_path_factory.mktemp("study")
    workdir, state = fugaku_workflow(root), root / "pjm"
    target = f"{RESULTS}/tables/scaling.csv"
    first = snakemake(workdir, state, target)
    rank_output = [*workdir.glob("output.*"), *(workdir / RESULTS / "logs/train").rglob("*.rank.*")]
    again = snakemake(workdir, state, target, "-n")
    yield SimpleNamespace(workdir=workdir, state=state, first=first, jobs=jobs(state), rank_output=rank_output,
                          again=again)
    kill_left_running(state)


def snakemake(workdir, state, *args, timeout=600, **extra):
    return subprocess.run([str(BIN / "snakemake"), "--profile", "workflow/profiles/fugaku", *FAST, *args],
                          cwd=workdir, env=emulator_env(state, **extra), capture_output=True, text=True,
                          timeout=timeout)


def test_emulator_refuses_what_pjsub_refuses(tmp_path):
    env = emulator_env(tmp_path / "pjm", PJM_EMULATOR_ACCEPT_LIMIT="1")
    script = tmp_path / "job.sh"

    def submit(*directives):
        script.write_text("#!/bin/bash\n" + "".join(f"#PJM {d}\n" for d in directives) + "sleep 30\n")
        return subprocess.run([str(EMULATOR / "pjsub"), str(script)], cwd=tmp_path, env=env, capture_output=True,
                              text=True)

    assert "PJM 0071" in submit("-x PJM_LLIO_GFSCACHE=/vol0004").stderr
    assert "set PJM_LLIO_GFSCACHE" in submit("-g hp000000").stderr
    assert "PJM 0001" in submit("-g hp000000", "--no-check-directory").stderr
    accepted = submit("-g hp000000", "-x PJM_LLIO_GFSCACHE=/vol0004")
    assert accepted.stdout.strip() == "[INFO] PJM 0000 pjsub Job 1 submitted."
    assert "PJM 0072" in submit("-g hp000000", "-x PJM_LLIO_GFSCACHE=/vol0004").stderr
    deleted = subprocess.run([str(EMULATOR / "pjdel"), "1", "7"], env=env, capture_output=True, text=True)
    assert deleted.stdout.strip() == "[INFO] PJM 0100 pjdel Accepted job 1."
    assert "PJM 0112 pjdel Job 7 does not exist." in deleted.stderr
    listed = subprocess.run([str(EMULATOR / "pjstat"), "-H", "-v", "--choose", "jid,st,ec,pc,sn"], env=env,
                            capture_output=True, text=True)
    assert listed.stdout.split("\n")[1].split() == ["1", "CCL", "-", "1", "-"]


def test_a_tiny_study_runs_through_pjm(tiny_study):
    workdir, state, first, submitted = tiny_study.workdir, tiny_study.state, tiny_study.first, tiny_study.jobs
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert submitted and all(job["st"] == "EXT" and job["ec"] == "0" and job["pc"] == "0"
                             for job in submitted.values())
    # Per P one job partitions and plans (a group), one trains; the tables run locally.
    names = sorted(job["name"] for job in submitted.values())
    assert names == ["smk-preprocess_partition_plan"] * 2 + ["smk-train"] * 2
    for job_id in submitted:  # -o / -e / --spath of every job in the log folder
        for suffix in ("out", "err", "stats"):
            assert (workdir / "logs" / "pjm" / f"{job_id}.{suffix}").exists()
    # Training ran through Fujitsu MPI's mpiexec with -std-proc (execution.rank_output):
    # no rank output under output.<jobid>/, none left beside the logs.
    train = [job_id for job_id, job in submitted.items() if job["name"] == "smk-train"]
    assert len(train) == 2 and all((state / f"mpiexec-{job_id}").exists() for job_id in train)
    assert tiny_study.rank_output == []
    again = tiny_study.again
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr


def test_a_job_pjm_ends_abnormally_fails_with_its_pjm_code(fugaku):
    workdir, state = fugaku
    result = snakemake(workdir, state, "data/partitions/synthetic-tiny/P2",
                       PJM_EMULATOR_NODE_DOWN="smk-preprocess_partition")
    assert result.returncode != 0
    assert "exit code 0, PJM code 20 (node down)" in result.stderr
    assert [job["pc"] for job in jobs(state).values()] == ["20"]


def test_a_submission_over_the_accept_limit_names_the_fix(fugaku):
    workdir, state = fugaku
    result = snakemake(workdir, state, "data/partitions/synthetic-tiny/P1", "data/partitions/synthetic-tiny/P2",
                       "--keep-going", PJM_EMULATOR_ACCEPT_LIMIT="1")
    assert result.returncode != 0
    assert "PJM 0072" in result.stdout + result.stderr
    assert "pjm.accept_limit" in result.stdout + result.stderr
    assert len(jobs(state)) == 1


def test_interrupting_snakemake_cancels_its_jobs_with_pjdel(tiny_study):
    """Training longer in the tiny study's workflow (its P = 2 plan is there), interrupted."""
    workdir, state, before = tiny_study.workdir, tiny_study.state, tiny_study.jobs
    assert tiny_study.first.returncode == 0 and (workdir / "data/plans/synthetic-tiny/P2/hybrid").is_dir()
    overlay = workdir / "long.yaml"
    overlay.write_text(yaml.safe_dump({"training": {"epochs": 100000, "checkpoint_every": 1}}))
    target = f"{RESULTS}/runs/synthetic-tiny/P2/hybrid-fp32-nolp/seed0.jsonl"
    configs = ["--configfiles", "config/config.yaml", "config/fugaku.yaml"]
    checkpoints = workdir / "data" / "checkpoints"
    assert not list(checkpoints.rglob("*.pt")), "the study's finished runs keep no checkpoint"
    running = subprocess.Popen([str(BIN / "snakemake"), "--profile", "workflow/profiles/fugaku", *FAST, target,
                                *configs, str(overlay)], cwd=workdir, env=emulator_env(state),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not list(checkpoints.rglob("*.pt")):
        time.sleep(0.5)
    assert any(job["name"] == "smk-train" for job_id, job in jobs(state).items() if job_id not in before), \
        running.communicate(timeout=60)[0]
    os.killpg(running.pid, signal.SIGINT)
    output, _ = running.communicate(timeout=120)
    train = [job for job_id, job in jobs(state).items() if job["name"] == "smk-train" and job_id not in before]
    assert [(job["st"], job["pc"]) for job in train] == [("CCL", "1")], (train, output[-3000:])
    assert not (workdir / target).exists()
    # The next run meets the checkpoint; rank 0 says so in its own output file, which
    # reaches the rule's log.
    overlay.write_text(yaml.safe_dump({"training": {"epochs": 3, "checkpoint_every": 1}}))
    finished = snakemake(workdir, state, target, *configs, str(overlay))
    assert finished.returncode == 0, finished.stderr[-3000:]
    log = (workdir / RESULTS / "logs/train/synthetic-tiny/P2/hybrid-fp32-nolp/seed0.log").read_text()
    assert "== " in log and "checkpoint" in log, log
