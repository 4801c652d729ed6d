"""Checks a study against the Slurm cluster before the slurm profile submits anything.

Snakemake's SLURM executor (snakemake-executor-plugin-slurm) meets these problems late or
never, which on a real Slurm 22.05 looked like this:

* status queries that fail (``sacct`` without accounting storage): the executor drops the
  jobs it cannot see and Snakemake waits, idle, forever;
* a job no node of the partition can hold (more CPUs or memory per node than a node has):
  it pends forever (``Reason=PartitionConfig``) while Snakemake waits;
* an account or partition that does not exist: refused at submission, job by job;
* a job cancelled by anyone (``scancel``, an administrator): sacct reports its state as
  ``CANCELLED by <uid>``, which the executor (2.8.0) does not recognise as ``CANCELLED``, so
  it waits for the job forever.

:func:`check_cluster` runs in the workflow's ``onstart`` hook (after the DAG is built,
before the first submission, not in dry runs) and reports each problem as one line naming
the setting to change. Only the jobs about to be submitted are checked, with the resources
Snakemake computed for them. The same hook calls :func:`recognise_cancelled_jobs`.
"""

from __future__ import annotations

import getpass
import math
import shlex
import shutil
import subprocess
from dataclasses import dataclass

#: Where the account and partition are set.
PROFILE = "the slurm profile's default-resources (workflow/profiles/slurm/config.yaml) or --default-resources"
#: The plugin's interval before the first status query, when the profile sets none.
DEFAULT_INITIAL_INTERVAL = 40


class SlurmQueryError(Exception):
    """A Slurm client command failed; the message is its first line of output."""


def query(*command: str) -> str:
    """The standard output of a Slurm client command."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise SlurmQueryError(f"{command[0]} is not on PATH") from None
    except subprocess.TimeoutExpired:
        raise SlurmQueryError(f"`{' '.join(command)}` did not answer within 60 s") from None
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip() or f"exit status {done.returncode}").splitlines()[0]
        raise SlurmQueryError(f"`{command[0]}` says: {said}")
    return done.stdout


@dataclass(frozen=True)
class RankJob:
    """What one MPI job asks of Slurm: ``nodes`` nodes, ``mem_mb`` on each."""

    rule: str
    wildcards: str
    account: str | None
    partition: str | None
    nodes: int
    tasks: int
    cpus_per_task: int
    mem_mb: int | None

    @property
    def name(self) -> str:
        return f"{self.rule} job ({self.wildcards})"

    @property
    def cpus_per_node(self) -> int:
        return math.ceil(self.tasks / self.nodes) * self.cpus_per_task


@dataclass(frozen=True)
class Node:
    name: str
    cpus: int
    memory_mb: int

    def holds(self, job: RankJob) -> bool:
        return self.cpus >= job.cpus_per_node and (job.mem_mb is None or self.memory_mb >= job.mem_mb)


def partitions() -> dict[str, dict[str, str]]:
    """Every partition's ``scontrol show partition`` fields, by name."""
    found = {}
    for line in query("scontrol", "show", "partition", "--oneliner").splitlines():
        fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
        if "PartitionName" in fields:
            found[fields["PartitionName"]] = fields
    return found


def partition_nodes(partition: str) -> list[Node]:
    nodes = {}
    for line in query("sinfo", "--noheader", "--Node", "--partition", partition, "--format", "%N|%c|%m").splitlines():
        name, cpus, memory = line.split("|")
        nodes[name] = Node(name, int(cpus), int(memory.rstrip("+")))
    return list(nodes.values())


def min_job_age() -> int | None:
    """Slurm's MinJobAge in seconds: how long ``squeue`` still lists an ended job."""
    for line in query("scontrol", "show", "config").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "MinJobAge":
            digits = value.split()[0] if value.split() else ""
            return int(digits) if digits.isdigit() else None
    return None


def status_query(command: str) -> list[str]:
    """The executor's own status query (``sacct`` or ``squeue``) for a run of no jobs."""
    from snakemake_executor_plugin_slurm.job_status_query import query_job_status_sacct, query_job_status_squeue

    builder = query_job_status_sacct if command == "sacct" else query_job_status_squeue
    return shlex.split(builder("supergcn-preflight"))


def status_problems(requested: str | None, initial_interval: int) -> list[str]:
    """Whether the executor's status queries work, choosing between sacct and squeue as it does.

    The executor (2.8) uses ``squeue`` only where asked to and where Slurm's MinJobAge keeps
    ended jobs listed for 3 initial status intervals; otherwise ``sacct``, where present.
    """
    have_sacct = shutil.which("sacct") is not None
    age = min_job_age()
    threshold = 3 * initial_interval
    squeue_suffices = age is not None and age >= threshold
    command = requested or ("sacct" if have_sacct else "squeue")
    if command == "squeue" and have_sacct and not squeue_suffices:
        command = "sacct"
    if not have_sacct:
        command = "squeue"
    try:
        query(*status_query(command))
        return []
    except SlurmQueryError as error:
        what = f"job status queries fail, so the executor would lose every job and wait forever: {error}"
    if command == "squeue":
        return [f"{what} — check that `squeue` reaches slurmctld from this machine"]
    if squeue_suffices:
        fix = "add `slurm-status-command: squeue` to the slurm profile (or enable accounting: slurmdbd)"
    else:
        fix = (f"enable accounting (slurmdbd), or add `slurm-status-command: squeue` to the slurm profile with "
               f"slurm-init-seconds-before-status-checks at most {(age or 0) // 3}: the executor uses squeue only "
               f"while Slurm's MinJobAge ({age} s) is at least 3 times that interval")
    return [f"{what} — {fix}"]


def account_problems(accounts: set[str]) -> list[str]:
    if not accounts:
        return []
    user = getpass.getuser()
    try:
        known = {line.strip().lower() for line in query(
            "sacctmgr", "--noheader", "--parsable2", "show", "associations", f"user={user}", "format=account",
        ).splitlines() if line.strip()}
    except SlurmQueryError as error:
        return [f"the slurm_account cannot be checked: {error} — check that sacctmgr reaches slurmdbd, or leave "
                f"slurm_account out of {PROFILE} to use your default account"]
    return [f"slurm_account {account!r} is not an account of user {user} (sacctmgr lists: "
            f"{', '.join(sorted(known)) or 'none'}) — set slurm_account in {PROFILE}"
            for account in sorted(accounts) if account.lower() not in known]


def fit_problems(jobs: list[RankJob]) -> list[str]:
    """Every partition named exists and is up, and some of its nodes hold each job."""
    known = partitions()
    default = next((name for name, fields in known.items() if fields.get("Default") == "YES"), None)
    listing = ", ".join(sorted(known)) or "none"
    problems, nodes_of = [], {}
    for name in sorted({job.partition or "" for job in jobs}):
        partition = name or default
        if partition is None:
            problems.append(f"slurm_partition is not set and the cluster has no default partition (partitions: "
                            f"{listing}) — set slurm_partition in {PROFILE}")
        elif partition not in known:
            problems.append(f"slurm_partition {partition!r} does not exist (partitions: {listing}) — "
                            f"set slurm_partition in {PROFILE}")
        elif known[partition].get("State") != "UP":
            problems.append(f"partition {partition} is {known[partition].get('State')}: jobs would pend until it is UP "
                            f"— choose another slurm_partition in {PROFILE}")
        else:
            nodes_of[name] = (partition, partition_nodes(partition))
    unfit = {}
    for job in jobs:
        if (job.partition or "") in nodes_of:
            partition, nodes = nodes_of[job.partition or ""]
            if sum(node.holds(job) for node in nodes) < job.nodes:
                unfit.setdefault((job.rule, partition), []).append(job)
    for (rule, partition), refused in unfit.items():
        nodes = nodes_of[refused[0].partition or ""][1]
        job = max(refused, key=lambda job: (job.cpus_per_node, job.mem_mb or 0, job.nodes))
        more = f" (and {len(refused) - 1} more {rule} jobs)" if len(refused) > 1 else ""
        most_cpus = max((node.cpus for node in nodes), default=0)
        most_memory = max((node.memory_mb for node in nodes), default=0)
        keys = []
        if job.cpus_per_node > most_cpus:
            keys.append("execution.threads_per_rank")
        if job.mem_mb is not None and job.mem_mb > most_memory:
            keys.append("execution.mem_mb_per_rank")
        keys = keys or ["process_counts"]
        memory = f" and {job.mem_mb} MB" if job.mem_mb is not None else ""
        problems.append(
            f"{job.name} needs {job.nodes} node(s) of {job.cpus_per_node} CPUs "
            f"({math.ceil(job.tasks / job.nodes)} ranks × {job.cpus_per_task} threads){memory}, but partition "
            f"{partition} has {sum(node.holds(job) for node in nodes)} such node(s) of {len(nodes)} (at most "
            f"{most_cpus} CPUs and {most_memory} MB a node), so it would pend forever{more} — lower "
            f"{' or '.join([*keys, 'execution.ranks_per_node'])} in config/slurm.yaml, or choose another "
            f"slurm_partition in {PROFILE}")
    return problems


def check_cluster(jobs: list[RankJob], status_command: str | None, initial_interval: int | None) -> list[str]:
    """Every problem the cluster has with these jobs, one line each (empty: go ahead)."""
    try:
        return [
            *status_problems(status_command, initial_interval or DEFAULT_INITIAL_INTERVAL),
            *account_problems({job.account for job in jobs if job.account}),
            *fit_problems(jobs),
        ]
    except SlurmQueryError as error:
        return [f"the cluster cannot be queried: {error} — run Snakemake where Slurm's client commands reach "
                "slurmctld (a login node), with SLURM_CONF set if the site needs it"]


def job_state(reported: str) -> str:
    """The state of a job as sacct or squeue reports it, without sacct's `` by <uid>``."""
    return reported.split(" by ", 1)[0]


def recognise_cancelled_jobs() -> None:
    """Make the executor read ``CANCELLED by <uid>`` as ``CANCELLED``, a failed job.

    Wraps the executor's status query in this (the main) Snakemake process; states are
    otherwise passed through unchanged.
    """
    import snakemake_executor_plugin_slurm as executor

    query_job_status = executor.query_job_status
    if getattr(query_job_status, "recognises_cancelled", False):
        return

    async def with_plain_states(command, logger):
        states, seconds = await query_job_status(command, logger)
        if states is not None:
            states = {job: job_state(state) for job, state in states.items()}
        return states, seconds

    with_plain_states.recognises_cancelled = True
    executor.query_job_status = with_plain_states
