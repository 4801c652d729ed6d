"""Fujitsu PJM (Fugaku) wrappers for Snakemake's cluster-generic executor.

* ``submit``: writes a PJM script with the job's resources as ``#PJM`` directives,
  submits it with ``pjsub`` and prints the job id.
* ``status``: asks ``pjstat`` (current jobs, then the history with ``-H``) and prints
  ``running``, ``success`` or ``failed`` as the executor expects.
* cancelling is ``pjdel`` itself (the executor calls ``[cancel-cmd] + job ids``), and
  ``supergcn-pjm-sidecar`` deletes what is left: while a status round is under way,
  Snakemake's executor holds no active job to cancel, so a Ctrl-C then would leave jobs
  running. The sidecar notes every job the run submits and ``pjdel``\\ s those that have not
  ended when it is stopped (by Snakemake at its end, or by the Ctrl-C itself).

What follows the "Supercomputer Fugaku Users Guide - Use and job execution" (1.52,
RIKEN-RCCS ``fugaku-doc``; sections in brackets) and Fujitsu's Job Operation Software
Command Reference (CR) and End-user's Guide (EUG):

* A job must name its project group, ``-g`` (otherwise ``PJM 0071 ... Group not
  authorized to submit a job: group(59999)``) [Usage rules: Group; Normal job]. It must
  declare the data volumes it reads, ``-x PJM_LLIO_GFSCACHE=/vol000N[:...]``, /vol0004
  for Spack [Layered storage: Select available volumes]. ``--no-check-directory``,
  ``--no-check-gfscache`` and ``--all-mount-gfscache`` are refused inside a script and
  go on the pjsub command line (``pjm.pjsub_args``).
* The states [Displaying job status: Job status items]: ACC, QUE, RNA, RNP, RUN, RNE,
  RNO, RSM, SPP and SPD are on their way; EXT has ended; CCL was cancelled, RJT
  rejected; ERR and HLD stay in the list until the user deletes them.
* Success needs EC (the script's exit code) 0, PC (the job manager's code) 0 and no
  signal SN: "the job end code might not be 0 though the exit status of the job script
  is 0 when the job could not be processed normally (ex. exceeding elapse time limit)"
  [EUG 2.3.4.2]. The PC meanings are :data:`PJM_CODES` [Checking abnormal end of job].
* pjstat lists ended jobs only with ``-H`` and ignores unknown job ids silently [CR
  3.1.13]; ``--choose`` picks single-word columns, so rows split on whitespace. One
  listing of all the user's jobs is shared by every status query for a few seconds.

Site values come from the site file's ``pjm:`` section (``config/fugaku.yaml``).

Why Snakemake's cluster-generic executor and not an executor plugin of our own: what a
plugin would add is here already (one pjstat listing shared by every status query,
``pjdel`` on cancel, the whole job script written by :func:`pjm_script`), while
Snakemake finds executor plugins only as top-level packages on ``sys.path`` and never in
an editable install, which is how this project is installed; a plugin would need a
second distribution or a path hack, and would track an interface that changes between
Snakemake versions.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import yaml

from supergcn.errors import SuperGCNError

#: States of a job that has not ended yet.
ON_THE_WAY = {"ACC", "QUE", "RNA", "RNP", "RUN", "RNE", "RNO", "RSM", "SPP", "SPD"}
#: Ended without running to its end: cancelled or rejected.
CANCELLED = {"CCL", "RJT"}
#: Job manager exit codes (PC) [Checking abnormal end of job: Job manager exit code].
PJM_CODES = {
    "0": "successful job completion", "1": "cancelled by pjdel", "2": "rejected at acceptance",
    "3": "rejected by the job manager exit function", "4": "held by pjhold", "6": "cancelled by a step dependency",
    "7": "cancelled by a deadline", "8": "cancelled by the job manager exit function",
    "9": "ended during job reconstruction", "11": "elapse time limit exceeded",
    "12": "memory limit exceeded", "13": "disk limit exceeded",
    "16": "current directory or standard input/output/error file not accessible",
    "18": "terminated by a later job or a deadline schedule", "20": "node down", "21": "shell execution failed",
    "22": "ICC error", "23": "killed by the OOM killer", "25": "HA failure", "26": "prologue or epilogue error",
    "27": "job resource exit processing error", "28": "abnormal job execution environment",
    "29": "invalid job execution environment", "30": "suspend or resume failed",
    "100": "job manager internal error", "120": "job scheduler internal error",
    "140": "job resource management internal error", "160": "Tofu library internal error",
    "180": "tiered storage internal error",
}
#: Hints for pjsub rejections [CR 3.1.14 messages].
PJSUB_HINTS = {
    "0071": "set pjm.group in the site file to your project group (`userinfo | grep groupList`)",
    "0072": "PJM's accept limit is reached (`pjstat --limit`, ru-accept): keep `jobs` in "
            "workflow/profiles/fugaku/config.yaml below pjm.accept_limit",
    "0057": "a resource is over the resource group's limit: lower execution.runtime_minutes or the process "
            "count, or choose another pjm.resource_group",
    "0045": "a PJM_LLIO_GFSCACHE volume is not on the global file system: fix pjm.gfscache",
}
COMMAND_LINE_ONLY = ("--no-check-directory", "--no-check-gfscache", "--all-mount-gfscache")
_SUBMITTED = re.compile(r"\[INFO\.?\] PJM 0000 pjsub Job (\S+) submitted")
_PJM_ERROR = re.compile(r"PJM (\d{4}) pjsub")
_VOLUME = re.compile(r"^/vol000[2-6]$")
#: How cluster-generic hands the sidecar's first output line to the submit command.
SIDECAR_VARIABLE = "SNAKEMAKE_CLUSTER_SIDECAR_VARS"


def read_site(path: str | Path) -> dict:
    """The ``pjm`` section of a site file, plus ``ranks_per_node`` from its ``execution``."""
    path = Path(path)
    if not path.is_file():
        raise SuperGCNError(f"site file {path} not found", "pass --site config/fugaku.yaml (or your copy)")
    document = yaml.safe_load(path.read_text()) or {}
    site = document.get("pjm") or {}
    if not site.get("resource_group"):
        raise SuperGCNError(f"{path} has no pjm.resource_group", "set it to your Fugaku resource group")
    if not site.get("group"):
        raise SuperGCNError(f"{path} has no pjm.group: pjsub refuses jobs without a project group (PJM 0071)",
                            "set it to yours (`userinfo | grep groupList`)")
    bad = [volume for volume in site.get("gfscache", []) if not _VOLUME.match(str(volume))]
    if bad:
        raise SuperGCNError(f"{path}: pjm.gfscache holds {bad}", "name volumes /vol0002 .. /vol0006")
    misplaced = [line for line in site.get("directives", []) if line.split()[:1] and
                 line.split()[0] in COMMAND_LINE_ONLY]
    if misplaced:
        raise SuperGCNError(f"{path}: {misplaced} cannot be #PJM directives", "move them to pjm.pjsub_args")
    ranks_per_node = (document.get("execution") or {}).get("ranks_per_node")
    if not ranks_per_node:
        raise SuperGCNError(f"{path} has no execution.ranks_per_node", "set it (4 on Fugaku, one rank per CMG)")
    return {**site, "ranks_per_node": int(ranks_per_node)}


def elapse(minutes: int) -> str:
    hours, minutes = divmod(int(minutes), 60)
    return f"{hours:02d}:{minutes:02d}:00"


def pjm_script(jobscript: str, site: dict, name: str, nodes: int, procs: int, threads: int, elapse_minutes: int,
               log_dir: str, ranks_per_node: int = 0) -> str:
    """The PJM batch script that runs Snakemake's ``jobscript`` on the requested nodes, at
    most ``ranks_per_node`` ranks on each (the study's, which a config overlay may have
    changed; 0: the site file's)."""
    per_node = ranks_per_node or site["ranks_per_node"]
    # A group job's resources are summed over its parallel steps; it needs no more nodes
    # than its processes fill.
    nodes = min(nodes, -(-procs // per_node))
    resources = [f"node={nodes}", f"rscgrp={site['resource_group']}", f"elapse={elapse(elapse_minutes)}",
                 *site.get("extra_resources", [])]
    lines = ["#!/bin/bash", f"#PJM --name {name}"]
    lines += [f'#PJM -L "{resource}"' for resource in resources]
    lines += [f"#PJM -g {site['group']}", f'#PJM --mpi "proc={procs}"',
              f'#PJM --mpi "max-proc-per-node={per_node}"']
    if site.get("gfscache"):
        lines.append(f"#PJM -x PJM_LLIO_GFSCACHE={':'.join(site['gfscache'])}")
    lines += [f"#PJM -o {log_dir}/%j.out", f"#PJM -e {log_dir}/%j.err", "#PJM -S", f"#PJM --spath {log_dir}/%j.stats"]
    lines += [f"#PJM {directive}" for directive in site.get("directives", [])]
    lines += [f"export OMP_NUM_THREADS={threads}", *site.get("setup", []), f"bash {shlex.quote(jobscript)}"]
    return "\n".join(lines) + "\n"


def pjm_command(run, command: list[str]) -> subprocess.CompletedProcess:
    """Run one of PJM's commands, its output captured; a missing command is a clear error."""
    try:
        return run(command, capture_output=True, text=True)
    except FileNotFoundError as exc:
        raise SuperGCNError(f"{command[0]} not found on PATH",
                            "run this where Fujitsu PJM's commands (pjsub, pjstat, pjdel) are installed, such as a "
                            "Fugaku login node") from exc


def submit(jobscript: str, site_path: str, name: str, nodes: int, procs: int, threads: int, elapse_minutes: int,
           log_dir: str, run=subprocess.run, ranks_per_node: int = 0) -> str:
    """pjsub a script that runs ``jobscript``, at most ``ranks_per_node`` ranks a node (0: the
    site file's); return the job id (a rejection raises, with a hint)."""
    site = read_site(site_path)
    Path(log_dir).mkdir(parents=True, exist_ok=True)
    script = Path(log_dir) / f"{Path(jobscript).stem}.pjm.sh"
    script.write_text(pjm_script(jobscript, site, name, nodes, procs, threads, elapse_minutes, log_dir, ranks_per_node))
    result = pjm_command(run, ["pjsub", *site.get("pjsub_args", []), str(script)])
    output = (result.stdout + result.stderr).strip()
    match = _SUBMITTED.search(output)
    if result.returncode != 0 or not match:
        code = _PJM_ERROR.search(output)
        hint = PJSUB_HINTS.get(code.group(1)) if code else None
        raise SuperGCNError(f"pjsub refused {script}: {output}",
                            hint or "check the pjm section of the site file and the resources the rule asks for")
    job_list = os.environ.get(SIDECAR_VARIABLE)
    if job_list:  # the sidecar of this run cancels it if the run is stopped
        with open(job_list, "a") as jobs:
            jobs.write(match.group(1) + "\n")
    return match.group(1)


def parse_pjstat(output: str) -> dict[str, dict[str, str]]:
    """Rows of a ``pjstat --choose`` table keyed by job id (columns named by its header line)."""
    rows, header = {}, None
    for line in output.splitlines():
        fields = line.split()
        if not fields:
            continue
        if "JOB_ID" in fields:
            header = fields
            continue
        if header and len(fields) == len(header):
            row = dict(zip(header, fields))
            rows[row["JOB_ID"]] = row
    return rows


def verdict(row: dict[str, str]) -> tuple[str, str | None]:
    """(running / success / failed, why it failed) of one ``pjstat`` row."""
    state, exit_code, pjm_code, signal = (row.get(key, "-") for key in ("ST", "EC", "PC", "SN"))
    code = f"PJM code {pjm_code} ({PJM_CODES.get(pjm_code, 'unknown')})"
    if state in ON_THE_WAY:
        return "running", None
    if state == "EXT":
        if exit_code == "0" and pjm_code == "0" and signal in ("0", "-"):
            return "success", None
        return "failed", f"ended with exit code {exit_code}, {code}, signal {signal}"
    if state in CANCELLED:
        return "failed", f"{'cancelled' if state == 'CCL' else 'rejected'}: {code}"
    if state == "ERR":
        return "failed", f"stopped by an error the job manager detected ({code}); deleted with pjdel"
    if state == "HLD":
        return "failed", f"held ({code}): Snakemake counts it as failed; release or `pjdel` it yourself"
    return "failed", f"in a state this wrapper does not know: {state}"


def listing(history: bool, state_dir: str | Path, max_age: float, run=subprocess.run, now=time.time) -> str:
    """The output of one ``pjstat [-H] -v --choose jid,st,ec,pc,sn`` for all of the
    user's jobs, shared through ``state_dir`` by every status query for ``max_age``
    seconds: one pjstat call serves all active jobs (sites frown on status polling)."""
    cache = Path(state_dir) / ("pjstat-history.txt" if history else "pjstat.txt")
    if cache.exists():
        stamp, _, output = cache.read_text().partition("\n")
        if now() - float(stamp) < max_age:
            return output
    command = ["pjstat", *(["-H"] if history else []), "-v", "--choose", "jid,st,ec,pc,sn"]
    result = pjm_command(run, command)
    if result.returncode != 0:
        raise SuperGCNError(f"`{' '.join(command)}` failed: {(result.stdout + result.stderr).strip()}",
                            "check that PJM answers (run pjstat by hand); Snakemake asks again at its next check")
    cache.parent.mkdir(parents=True, exist_ok=True)
    partial = cache.with_name(f".{cache.name}.{os.getpid()}")
    partial.write_text(f"{now()}\n{result.stdout}")
    os.replace(partial, cache)
    return result.stdout


def status(job_id: str, state_dir: str | Path = "logs/pjm", missing_timeout: float = 600.0, max_age: float = 20.0,
           run=subprocess.run, now=time.time) -> str:
    """``running``, ``success`` or ``failed`` for ``job_id``; the reason for a failure
    goes to stderr. A job that neither pjstat nor its history lists is running for
    ``missing_timeout`` seconds (pjstat may not show a fresh job yet), then failed."""
    marker = Path(state_dir) / f"{job_id}.unlisted"
    # The second pass refreshes both listings: a job may end between two cached ones.
    for age in (max_age, 0.0):
        row = (parse_pjstat(listing(False, state_dir, age, run, now)).get(job_id)
               or parse_pjstat(listing(True, state_dir, age, run, now)).get(job_id))
        if row is not None:
            marker.unlink(missing_ok=True)
            answer, reason = verdict(row)
            if reason:
                print(f"PJM job {job_id} {reason}", file=sys.stderr)
            if row.get("ST") == "ERR":
                pjm_command(run, ["pjdel", job_id])
            return answer
        if not marker.exists():
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(str(now()))
        waited = now() - float(marker.read_text())
        if waited <= missing_timeout:
            return "running"
    marker.unlink(missing_ok=True)
    print(f"PJM job {job_id} has not been listed by pjstat (nor its history) for {waited:.0f} s: "
          "counted as failed", file=sys.stderr)
    return "failed"


def cancel_unfinished(job_list: Path, run=subprocess.run) -> list[str]:
    """``pjdel`` the jobs of ``job_list`` that a fresh pjstat still lists as not ended;
    return their ids."""
    submitted = job_list.read_text().split() if job_list.exists() else []
    if not submitted:
        return []
    result = pjm_command(run, ["pjstat", "-v", "--choose", "jid,st,ec,pc,sn"])
    listed = parse_pjstat(result.stdout) if result.returncode == 0 else {}
    # Unreadable listing: delete them all (pjdel refuses ended jobs harmlessly).
    unfinished = [job for job in submitted if job in listed or result.returncode != 0]
    if unfinished:
        pjm_command(run, ["pjdel", *unfinished])
    return unfinished


def sidecar(state_dir: str | Path = "logs/pjm") -> int:
    """The run's sidecar (``cluster-generic-sidecar-cmd: supergcn-pjm-sidecar``): print
    the file the submit command notes job ids in, then wait; on SIGTERM or SIGINT cancel
    the jobs that have not ended, and go."""
    import signal

    stop = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)  # from now on a stop waits for sigwait
    job_list = Path(state_dir).resolve() / f"sidecar-{os.getpid()}.jobs"
    job_list.parent.mkdir(parents=True, exist_ok=True)
    job_list.touch()
    print(job_list, flush=True)
    signal.sigwait(stop)
    cancelled = cancel_unfinished(job_list)
    if cancelled:
        print(f"pjdel {' '.join(cancelled)}: the run stopped before these jobs ended", flush=True)
    job_list.unlink(missing_ok=True)
    return 0


def sidecar_main() -> None:
    """Entry point of the ``supergcn-pjm-sidecar`` program (one word: the executor runs
    the sidecar command without a shell)."""
    sys.exit(sidecar())
