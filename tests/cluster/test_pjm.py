"""PJM wrappers on recorded pjsub / pjstat output (no PJM needed)."""

import subprocess

import pytest
import yaml

from supergcn.cluster import pjm
from supergcn.errors import SuperGCNError

PJSUB_OK = "[INFO] PJM 0000 pjsub Job 8675309 submitted.\n"
PJSUB_REJECTED = "[ERR.] PJM 0007 pjsub Staging option error (3).\n"
PJSTAT_HEADER = "JOB_ID     ST  EC\n"


def fake_run(outputs):
    """A subprocess.run stand-in that answers each command from ``outputs``."""
    calls = []

    def run(command, **kwargs):
        calls.append(command)
        key = "history" if "-H" in command else command[0]
        stdout, code = outputs.get(key, ("", 0))
        return subprocess.CompletedProcess(command, code, stdout=stdout, stderr="")

    return run, calls


@pytest.fixture
def site(tmp_path):
    path = tmp_path / "fugaku.yaml"
    path.write_text(yaml.safe_dump({"execution": {"ranks_per_node": 4},
                                    "pjm": {"group": "hp123456", "resource_group": "small",
                                            "extra_resources": ["freq=2200"], "setup": [". .venv/bin/activate"]}}))
    return path


def test_submit_writes_directives_and_returns_the_job_id(site, tmp_path):
    run, calls = fake_run({"pjsub": (PJSUB_OK, 0)})
    job_id = pjm.submit("/work/.snakemake/tmp/snakejob.train.7.sh", site, "smk-train", nodes=3, procs=12,
                        threads=12, elapse_minutes=90, log_dir=tmp_path / "logs", run=run)
    assert job_id == "8675309"
    script = calls[0][1]
    text = open(script).read()
    for directive in ('#PJM -L "node=3"', '#PJM -L "rscgrp=small"', '#PJM -L "elapse=01:30:00"',
                      '#PJM -L "freq=2200"', "#PJM -g hp123456", '#PJM --mpi "proc=12"',
                      '#PJM --mpi "max-proc-per-node=4"', "export OMP_NUM_THREADS=12"):
        assert directive in text.splitlines()
    assert text.splitlines()[-1] == "bash /work/.snakemake/tmp/snakejob.train.7.sh"
    assert text.index(". .venv/bin/activate") < text.index("bash /work")


def test_rejected_submission_is_an_error(site, tmp_path):
    run, _ = fake_run({"pjsub": (PJSUB_REJECTED, 1)})
    with pytest.raises(SuperGCNError, match="Staging option error"):
        pjm.submit("job.sh", site, "x", 1, 1, 1, 10, tmp_path, run=run)


def test_site_file_without_resource_group_is_refused(tmp_path):
    path = tmp_path / "site.yaml"
    path.write_text("pjm: {group: x}\n")
    with pytest.raises(SuperGCNError, match="resource_group"):
        pjm.read_site(path)


@pytest.mark.parametrize("state, exit_code, expected", [
    ("RUN", "-", "running"), ("RNO", "-", "running"), ("RNE", "-", "running"),
    ("ACC", "-", "running"), ("QUE", "-", "running"), ("RNA", "-", "running"), ("RNP", "-", "running"),
    ("HLD", "-", "running"), ("ERR", "-", "failed"), ("CCL", "-", "failed"), ("RJT", "-", "failed"),
])
def test_current_job_states(state, exit_code, expected):
    run, _ = fake_run({"pjstat": (f"{PJSTAT_HEADER}8675309    {state} {exit_code}\n", 0)})
    assert pjm.status("8675309", run=run) == expected


@pytest.mark.parametrize("exit_code, expected", [("0", "success"), ("1", "failed"), ("137", "failed")])
def test_finished_jobs_are_read_from_the_history(exit_code, expected):
    run, calls = fake_run({"pjstat": (PJSTAT_HEADER, 0),
                           "history": (f"{PJSTAT_HEADER}8675309    EXT {exit_code}\n", 0)})
    assert pjm.status("8675309", run=run) == expected
    assert "-H" in calls[1]


def test_unlisted_job_is_still_running():
    run, _ = fake_run({"pjstat": (PJSTAT_HEADER, 0), "history": (PJSTAT_HEADER, 0)})
    assert pjm.status("1", run=run) == "running"


def test_cancel_calls_pjdel():
    run, calls = fake_run({})
    pjm.cancel(["1", "2"], run=run)
    assert calls == [["pjdel", "1", "2"]]
