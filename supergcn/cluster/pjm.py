"""Fujitsu PJM (Fugaku) wrappers for Snakemake's cluster-generic executor.

* ``submit``: writes a PJM script with the job's resources as ``#PJM`` directives,
  submits it with ``pjsub`` and prints the job id.
* ``status``: asks ``pjstat`` (current jobs, then the history with ``-H``) and prints
  ``running``, ``success`` or ``failed`` as the executor expects.
* ``cancel``: ``pjdel`` the given jobs.

PJM states: RUN, RNO, RNE are running; ACC, QUE, RNA, RNP, HLD are waiting (reported
as running: the executor knows no "queued"); EXT has ended, successfully only when the
exit code EC is 0; ERR, CCL, RJT failed. Site values (group, resource group, extra
``-L`` units, setup lines) come from the site file, e.g. ``config/fugaku.yaml``.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from supergcn.errors import SuperGCNError

RUNNING = {"RUN", "RNO", "RNE", "ACC", "QUE", "RNA", "RNP", "HLD"}
FAILED = {"ERR", "CCL", "RJT"}
_SUBMITTED = re.compile(r"Job (\d+) submitted")


def read_site(path: str | Path) -> dict:
    """The ``pjm`` section of a site file, plus ``ranks_per_node`` from its ``execution``."""
    path = Path(path)
    if not path.is_file():
        raise SuperGCNError(f"site file {path} not found: pass --site config/fugaku.yaml (or your copy)")
    document = yaml.safe_load(path.read_text()) or {}
    site = document.get("pjm")
    if not site or not site.get("resource_group"):
        raise SuperGCNError(f"{path} has no pjm.resource_group: set it to your Fugaku resource group")
    ranks_per_node = (document.get("execution") or {}).get("ranks_per_node")
    if not ranks_per_node:
        raise SuperGCNError(f"{path} has no execution.ranks_per_node: set it (4 on Fugaku, one rank per CMG)")
    return {**site, "ranks_per_node": int(ranks_per_node)}


def elapse(minutes: int) -> str:
    hours, minutes = divmod(int(minutes), 60)
    return f"{hours:02d}:{minutes:02d}:00"


def pjm_script(jobscript: str, site: dict, name: str, nodes: int, procs: int, threads: int, elapse_minutes: int,
               log_dir: str) -> str:
    """The PJM batch script that runs Snakemake's ``jobscript`` on the requested nodes."""
    resources = [f"node={nodes}", f"rscgrp={site['resource_group']}", f"elapse={elapse(elapse_minutes)}",
                 *site.get("extra_resources", [])]
    lines = ["#!/bin/bash", f"#PJM --name {name}"]
    lines += [f'#PJM -L "{resource}"' for resource in resources]
    if site.get("group"):
        lines.append(f"#PJM -g {site['group']}")
    lines += [f'#PJM --mpi "proc={procs}"', f'#PJM --mpi "max-proc-per-node={site["ranks_per_node"]}"',
              f"#PJM -o {log_dir}/%j.out", f"#PJM -e {log_dir}/%j.err", "#PJM -S",
              f"export OMP_NUM_THREADS={threads}", *site.get("setup", []), f"bash {shlex.quote(jobscript)}"]
    return "\n".join(lines) + "\n"


def submit(jobscript: str, site_path: str, name: str, nodes: int, procs: int, threads: int, elapse_minutes: int,
           log_dir: str, run=subprocess.run) -> str:
    site = read_site(site_path)
    Path(log_dir).mkdir(parents=True, exist_ok=True)
    script = Path(log_dir) / f"{Path(jobscript).stem}.pjm.sh"
    script.write_text(pjm_script(jobscript, site, name, nodes, procs, threads, elapse_minutes, log_dir))
    result = run(["pjsub", str(script)], capture_output=True, text=True)
    match = _SUBMITTED.search(result.stdout + result.stderr)
    if result.returncode != 0 or not match:
        raise SuperGCNError(f"pjsub failed for {script}: {(result.stdout + result.stderr).strip()}")
    return match.group(1)


def parse_pjstat(output: str) -> dict[str, dict[str, str]]:
    """Rows of a ``pjstat`` table keyed by job id (columns named by its header line)."""
    rows, header = {}, None
    for line in output.splitlines():
        fields = line.split()
        if not fields:
            continue
        if "JOB_ID" in fields:
            header = fields
            continue
        if header and len(fields) >= len(header):
            row = dict(zip(header, fields))
            rows[row["JOB_ID"]] = row
    return rows


def state_of(row: dict[str, str]) -> str:
    state = row.get("ST") or row.get("STATUS") or ""
    if state in RUNNING:
        return "running"
    if state == "EXT":
        return "success" if row.get("EC", "0") == "0" else "failed"
    if state in FAILED:
        return "failed"
    return "running"


def status(job_id: str, run=subprocess.run) -> str:
    for command in (["pjstat", "-v", "--choose", "jid,st,ec", job_id],
                    ["pjstat", "-H", "-v", "--choose", "jid,st,ec", job_id]):
        result = run(command, capture_output=True, text=True)
        row = parse_pjstat(result.stdout).get(job_id)
        if row is not None:
            return state_of(row)
    # Not listed yet (just submitted) nor in the history: ask again later.
    print(f"pjstat does not list job {job_id} yet", file=sys.stderr)
    return "running"


def cancel(job_ids: list[str], run=subprocess.run) -> None:
    if job_ids:
        run(["pjdel", *job_ids], check=False)
