"""PJM wrappers on pjsub / pjstat output quoted from Fugaku's documentation (no PJM needed).

Sources (RIKEN-RCCS fugaku-doc): UG = "Supercomputer Fugaku Users Guide - Use and job
execution" 1.52; CR = Fujitsu "Job Operation Software Command Reference"; the section of
each fixture is named beside it.
"""

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from supergcn.cluster import pjm
from supergcn.errors import SuperGCNError

from conftest import REPO

# UG JobExecution/NormalJob, "Submitting a job".
PJSUB_OK = "[INFO] PJM 0000 pjsub Job 9714 submitted.\n"
PJSUB_NO_GROUP = "[ERR.] PJM 0071 pjsub Group not authorized to submit a job: group(59999)\n"
# CR 3.1.14 pjsub, error message 0072 ("target" is ru-accept for batch jobs).
PJSUB_ACCEPT_LIMIT = "[ERR.] PJM 0072 pjsub Job exceeded the accept limit: ru-accept.\n"
# UG JobExecution/pjsubCommandOptions, "Low priority jobs".
PJSUB_OVER_LIMIT = "[ERR.] PJM 0057 pjsub elapse=18000 is greater than the upper limit (14400).\n"
# CR 3.1.13 pjstat --choose: the chosen columns under the -v header's names.
PJSTAT_HEADER = "JOB_ID     ST  EC  PC  SN\n"


def fake_run(outputs):
    """A subprocess.run stand-in that answers each command from ``outputs``."""
    calls = []

    def run(command, **kwargs):
        calls.append(command)
        key = "history" if "-H" in command else command[0]
        stdout, code = outputs.get(key, ("", 0))
        return subprocess.CompletedProcess(command, code, stdout=stdout if code == 0 else "",
                                           stderr="" if code == 0 else stdout)

    return run, calls


SITE = {"execution": {"ranks_per_node": 4},
        "pjm": {"group": "hp123456", "resource_group": "small", "extra_resources": ["freq=2200"],
                "gfscache": ["/vol0004", "/vol0005"], "directives": ['-x "APPLOG=NO"'],
                "pjsub_args": ["--no-check-directory"], "accept_limit": 100,
                "setup": [". /vol0004/apps/oss/spack/share/spack/setup-env.sh"]}}


def write_site(tmp_path, **changes):
    path = tmp_path / "fugaku.yaml"
    path.write_text(yaml.safe_dump({**SITE, "pjm": {**SITE["pjm"], **changes}}))
    return path


def test_submit_writes_directives_and_returns_the_job_id(tmp_path):
    run, calls = fake_run({"pjsub": (PJSUB_OK, 0)})
    job_id = pjm.submit("/work/.snakemake/tmp/snakejob.train.7.sh", write_site(tmp_path), "smk-train", nodes=3,
                        procs=12, threads=12, elapse_minutes=90, log_dir=tmp_path / "logs", run=run)
    assert job_id == "9714"
    assert calls[0][:2] == ["pjsub", "--no-check-directory"]
    text = open(calls[0][2]).read()
    lines = text.splitlines()
    for directive in ('#PJM -L "node=3"', '#PJM -L "rscgrp=small"', '#PJM -L "elapse=01:30:00"',
                      '#PJM -L "freq=2200"', "#PJM -g hp123456", '#PJM --mpi "proc=12"',
                      '#PJM --mpi "max-proc-per-node=4"', "#PJM -x PJM_LLIO_GFSCACHE=/vol0004:/vol0005",
                      '#PJM -x "APPLOG=NO"', f"#PJM --spath {tmp_path / 'logs'}/%j.stats", "export OMP_NUM_THREADS=12"):
        assert directive in lines
    # Directives are read only before the first command line (UG JobExecution/Overview).
    first_command = next(k for k, line in enumerate(lines) if k and not line.startswith("#"))
    assert all(not line.startswith("#PJM") for line in lines[first_command:])
    assert lines[-1] == "bash /work/.snakemake/tmp/snakejob.train.7.sh"
    assert text.index("setup-env.sh") < text.index("bash /work")


@pytest.mark.parametrize("output, fragments", [
    (PJSUB_NO_GROUP, ["PJM 0071", "pjm.group"]),
    (PJSUB_ACCEPT_LIMIT, ["PJM 0072", "accept limit", "pjm.accept_limit"]),
    (PJSUB_OVER_LIMIT, ["PJM 0057", "execution.runtime_minutes"]),
])
def test_rejected_submissions_name_the_fix(tmp_path, output, fragments):
    run, _ = fake_run({"pjsub": (output, 1)})
    with pytest.raises(SuperGCNError) as error:
        pjm.submit("job.sh", write_site(tmp_path), "x", 1, 1, 1, 10, tmp_path, run=run)
    for fragment in fragments:
        assert fragment in str(error.value)


@pytest.mark.parametrize("change, fragment", [
    ({"resource_group": None}, "pjm.resource_group"),
    ({"group": None}, "pjm.group"),
    ({"gfscache": ["/vol0001"]}, "pjm.gfscache"),
    ({"directives": ["--no-check-directory"]}, "pjm.pjsub_args"),
])
def test_bad_site_files_are_refused_before_pjsub(tmp_path, change, fragment):
    with pytest.raises(SuperGCNError, match=fragment.replace(".", r"\.")):
        pjm.read_site(write_site(tmp_path, **change))


@pytest.mark.parametrize("state", ["ACC", "QUE", "RNA", "RNP", "RUN", "RNE", "RNO", "RSM", "SPP", "SPD"])
def test_jobs_on_their_way_are_running(state, tmp_path):
    run, _ = fake_run({"pjstat": (f"{PJSTAT_HEADER}9714       {state} -   -   -\n", 0)})
    assert pjm.status("9714", tmp_path, run=run) == "running"


@pytest.mark.parametrize("row, expected, reason", [
    ("EXT 0   0   0", "success", None),
    ("EXT 1   0   -", "failed", "exit code 1"),
    # EC 0 but the elapse limit hit: PC 11 (EUG 2.3.4.2, UG "Job manager exit code").
    ("EXT 0   11  -", "failed", "elapse time limit exceeded"),
    ("EXT 0   0   9", "failed", "signal 9"),
    ("CCL -   1   -", "failed", "cancelled by pjdel"),
    ("RJT -   2   -", "failed", "rejected"),
])
def test_ended_jobs_are_read_from_the_history(row, expected, reason, capsys, tmp_path):
    run, calls = fake_run({"pjstat": (PJSTAT_HEADER, 0), "history": (f"{PJSTAT_HEADER}9714       {row}\n", 0)})
    assert pjm.status("9714", tmp_path, run=run) == expected
    assert calls[0] == ["pjstat", "-v", "--choose", "jid,st,ec,pc,sn"]
    assert calls[1] == ["pjstat", "-H", "-v", "--choose", "jid,st,ec,pc,sn"]
    if reason:
        assert reason in capsys.readouterr().err


def test_error_jobs_fail_and_are_deleted(capsys, tmp_path):
    """ERR stays in the list until the user deletes it (UG "Job status items")."""
    run, calls = fake_run({"pjstat": (f"{PJSTAT_HEADER}9714       ERR -   28  -\n", 0)})
    assert pjm.status("9714", tmp_path, run=run) == "failed"
    assert calls[-1][:2] == ["pjdel", "9714"]
    assert "abnormal job execution environment" in capsys.readouterr().err


def test_held_jobs_are_not_running_forever(capsys, tmp_path):
    run, calls = fake_run({"pjstat": (f"{PJSTAT_HEADER}9714       HLD -   4   -\n", 0)})
    assert pjm.status("9714", tmp_path, run=run) == "failed"
    assert "held" in capsys.readouterr().err
    assert all(call[0] != "pjdel" for call in calls)  # the user's hold is the user's to release


def test_a_job_pjstat_never_lists_fails_after_the_timeout(tmp_path, capsys):
    run, _ = fake_run({"pjstat": (PJSTAT_HEADER, 0), "history": (PJSTAT_HEADER, 0)})
    answers = [pjm.status("9714", tmp_path, missing_timeout=600, max_age=0, run=run, now=lambda: moment)
               for moment in (1000.0, 1300.0, 1700.0)]
    assert answers == ["running", "running", "failed"]
    assert "not been listed by pjstat" in capsys.readouterr().err


def test_a_job_that_vanishes_from_pjstat_and_its_history_fails_after_the_timeout(tmp_path, capsys):
    listed, _ = fake_run({"pjstat": (f"{PJSTAT_HEADER}9714       RUN -   -   -\n", 0)})
    gone, _ = fake_run({"pjstat": (PJSTAT_HEADER, 0), "history": (PJSTAT_HEADER, 0)})
    answers = [pjm.status("9714", tmp_path, missing_timeout=600, max_age=0, run=run, now=lambda: moment)
               for run, moment in ((listed, 1000.0), (gone, 1100.0), (gone, 1600.0), (gone, 1800.0))]
    assert answers == ["running", "running", "running", "failed"]
    assert "not been listed by pjstat" in capsys.readouterr().err


def test_a_failing_pjstat_is_an_error_not_a_running_job(tmp_path):
    run, _ = fake_run({"pjstat": ("[ERR.] PJM 0290 pjstat PJM daemon is not present.\n", 1)})
    with pytest.raises(SuperGCNError, match="PJM daemon is not present"):
        pjm.status("9714", tmp_path, run=run)


def test_one_pjstat_listing_serves_every_job_until_it_is_old(tmp_path):
    table = f"{PJSTAT_HEADER}9714       RUN -   -   -\n9715       QUE -   -   -\n"
    run, calls = fake_run({"pjstat": (table, 0)})
    for job_id in ("9714", "9715", "9714"):
        assert pjm.status(job_id, tmp_path, max_age=20, run=run, now=lambda: 100.0) == "running"
    assert len(calls) == 1
    pjm.status("9714", tmp_path, max_age=20, run=run, now=lambda: 121.0)
    assert len(calls) == 2


def test_the_profile_cancels_with_pjdel_called_as_the_executor_calls_it(tmp_path):
    """cluster-generic runs ``[cancel_cmd] + job ids`` with shell=False."""
    profile = yaml.safe_load((REPO / "workflow" / "profiles" / "fugaku" / "config.yaml").read_text())
    record = tmp_path / "pjdel.args"
    fake = tmp_path / "pjdel"
    fake.write_text(f"#!/bin/bash\nprintf '%s\\n' \"$@\" > {record}\n"
                    "for id in \"$@\"; do echo \"[INFO] PJM 0100 pjdel Accepted job $id.\"; done\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    subprocess.check_call([profile["cluster-generic-cancel-cmd"], "9714", "9715"], shell=False, timeout=2, env=env)
    assert record.read_text().split() == ["9714", "9715"]


def test_the_profile_stays_below_the_accept_limit_and_off_the_drivers_interpreter():
    profile = yaml.safe_load((REPO / "workflow" / "profiles" / "fugaku" / "config.yaml").read_text())
    site = pjm.read_site(REPO / "config" / "fugaku.yaml")
    assert profile["jobs"] < site["accept_limit"]
    assert "software-deployment" not in profile["shared-fs-usage"]
    assert "/vol0004" in site["gfscache"] and any("spack" in line for line in site["setup"])


def test_rows_whose_columns_hold_spaces_are_not_misread():
    """EUG 2.4.1, "Displaying a job list": START_DATE holds a space, so a table that is not
    chosen column by column cannot be split on whitespace; such rows are skipped."""
    output = ("JOB_ID     JOB_NAME   MD START_DATE\n238        job.sh     NM 11/17 09:01:41\n"
              "239        bulk.sh    BU 11/17 09:01:42\n")
    assert pjm.parse_pjstat(output) == {}
    assert pjm.parse_pjstat("JOB_ID     ST  EC  PC  SN\n238        EXT 0   0   0\n")["238"]["PC"] == "0"


def test_a_job_that_ends_between_two_cached_listings_is_found_fresh(tmp_path):
    """The cached live listing was taken after the job ended, the cached history before:
    neither lists it. Before it may count as failed, both are asked again."""
    (tmp_path / "pjstat.txt").write_text(f"10.0\n{PJSTAT_HEADER}")
    (tmp_path / "pjstat-history.txt").write_text(f"5.0\n{PJSTAT_HEADER}")
    (tmp_path / "9714.unlisted").write_text("0.0")
    run, calls = fake_run({"pjstat": (PJSTAT_HEADER, 0), "history": (f"{PJSTAT_HEADER}9714       EXT 0   0   0\n", 0)})
    assert pjm.status("9714", tmp_path, missing_timeout=1, max_age=20, run=run, now=lambda: 12.0) == "success"
    assert len(calls) == 2 and not (tmp_path / "9714.unlisted").exists()


def test_a_group_job_asks_for_no_more_nodes_than_its_processes_fill(tmp_path):
    script = pjm.pjm_script("job.sh", pjm.read_site(write_site(tmp_path)), "g", nodes=3, procs=3, threads=1,
                            elapse_minutes=30, log_dir="logs")
    assert '#PJM -L "node=1"' in script.splitlines()


def test_the_study_s_ranks_per_node_wins_over_the_site_file_s(tmp_path):
    """An overlay's execution.ranks_per_node (2) reaches the job, not the site file's (4):
    8 ranks on 4 nodes, 2 a node."""
    run, calls = fake_run({"pjsub": (PJSUB_OK, 0)})
    pjm.submit("job.sh", write_site(tmp_path), "t", nodes=4, procs=8, threads=24, elapse_minutes=10,
               log_dir=tmp_path / "logs", run=run, ranks_per_node=2)
    lines = open(calls[0][2]).read().splitlines()
    assert '#PJM -L "node=4"' in lines and '#PJM --mpi "max-proc-per-node=2"' in lines


def test_submit_notes_the_job_for_the_sidecar(tmp_path, monkeypatch):
    job_list = tmp_path / "sidecar.jobs"
    monkeypatch.setenv(pjm.SIDECAR_VARIABLE, str(job_list))
    run, _ = fake_run({"pjsub": (PJSUB_OK, 0)})
    pjm.submit("job.sh", write_site(tmp_path), "x", 1, 1, 1, 10, tmp_path / "logs", run=run)
    assert job_list.read_text().split() == ["9714"]


def test_the_sidecar_deletes_only_the_jobs_still_listed(tmp_path):
    job_list = tmp_path / "sidecar.jobs"
    job_list.write_text("9714\n9715\n9716\n")
    run, calls = fake_run({"pjstat": (f"{PJSTAT_HEADER}9715       RUN -   -   -\n9716       QUE -   -   -\n", 0)})
    assert pjm.cancel_unfinished(job_list, run=run) == ["9715", "9716"]
    assert calls[-1] == ["pjdel", "9715", "9716"]


def test_the_sidecar_program_cancels_when_it_is_stopped(tmp_path):
    """Run as Snakemake runs it: one word, its first line read, then SIGTERM at the end."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "pjdel.args"
    (bin_dir / "pjstat").write_text(f"#!/bin/bash\nprintf '{PJSTAT_HEADER}9714 RUN - - -\\n'\n")
    (bin_dir / "pjdel").write_text(f"#!/bin/bash\nprintf '%s\\n' \"$@\" > {record}\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    sidecar = shutil.which("supergcn-pjm-sidecar", path=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}")
    process = subprocess.Popen([sidecar], cwd=tmp_path, stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    job_list = Path(process.stdout.readline().strip())
    assert job_list.parent == tmp_path / "logs" / "pjm"
    job_list.write_text("9714\n9713\n")
    process.terminate()
    assert process.wait(timeout=30) == 0
    assert record.read_text().split() == ["9714"]
    assert not job_list.exists()
