"""A Fujitsu PJM emulator for the tests: ``pjsub``, ``pjstat``, ``pjdel`` and Fujitsu MPI's
``mpiexec`` output files, run on this machine as Fugaku's guide describes them.

UG = "Supercomputer Fugaku Users Guide - Use and job execution" 1.52 (RIKEN-RCCS
fugaku-doc), CR = Fujitsu "Job Operation Software Command Reference"; sections in brackets.

* pjsub reads ``#PJM`` directives up to the first command line [UG JobExecution/Overview],
  refuses a job without ``-g`` (PJM 0071) [UG NormalJob: Submitting a job], without
  ``PJM_LLIO_GFSCACHE`` [UG Layered storage: Select available volumes], over the accept
  limit (PJM 0072) [CR 3.1.14] or over the elapse limit (PJM 0057) [UG pjsub options],
  and prints ``[INFO] PJM 0000 pjsub Job N submitted.``. The job runs detached with a
  minimal environment (pjsub does not pass the caller's on [UG pjsub options]), its
  output in the ``-o`` / ``-e`` files and its statistics in ``--spath``.
* States and codes [UG Displaying job status; Checking abnormal end of job]: QUE, RUN,
  EXT with EC (exit code), PC (job manager code) and SN (signal); CCL with PC 1 after
  pjdel; PC 11 past the elapse limit; ``PJM_EMULATOR_NODE_DOWN=<job name>`` makes such
  a job end with EC 0 and PC 20 (node down).
* pjstat lists jobs that have not ended; ``-H`` only the ended ones; ``--choose`` the
  given columns under the ``-v`` header names; unknown ids are ignored [CR 3.1.13].
* pjdel: ``[INFO] PJM 0100 pjdel Accepted job N.`` or ``PJM 0112 ... does not exist.``
  [UG Deleting a job].
* mpiexec writes each rank's output to ``./output.<jobid>/0/<n>/stdout.<n>.<rank>``
  (and stderr beside it), or to ``<name>.<n>.<rank>`` with ``-std-proc <name>``
  [UG MPI: Input/output redirection].

State lives in ``$PJM_EMULATOR_DIR``; ``PJM_EMULATOR_ACCEPT_LIMIT`` (default 100) and
``PJM_EMULATOR_MAX_ELAPSE`` (seconds, default 86400) set the limits.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ENDED = {"EXT", "CCL", "RJT"}
COLUMNS = {"jid": "JOB_ID", "jnam": "JOB_NAME", "st": "ST", "ec": "EC", "pc": "PC", "sn": "SN"}
COMMAND_LINE_ONLY = ("--no-check-directory", "--no-check-gfscache", "--all-mount-gfscache")


def home() -> Path:
    return Path(os.environ["PJM_EMULATOR_DIR"])


@contextmanager
def jobs_table():
    """The jobs table, locked for the duration (every command is a separate process)."""
    path = home() / "jobs.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(home() / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        table = json.loads(path.read_text()) if path.exists() else {"next": 1, "jobs": {}}
        yield table
        path.write_text(json.dumps(table, indent=1))


def directives(script: str) -> list[str]:
    """Option words of the ``#PJM`` lines before the first command line."""
    words = []
    for line in script.splitlines()[1:]:
        if line.startswith("#PJM"):
            words += shlex.split(line[4:])
        elif line.strip() and not line.startswith("#"):
            break
    return words


def parse_options(words: list[str]) -> dict:
    options = {"L": [], "x": [], "mpi": []}
    flags = {"-L": "L", "-x": "x", "--mpi": "mpi"}
    singles = {"-g": "group", "--name": "name", "-o": "out", "-e": "err", "--spath": "spath"}
    k = 0
    while k < len(words):
        word = words[k]
        if word in flags:
            options[flags[word]].append(words[k + 1])
            k += 2
        elif word in singles:
            options[singles[word]] = words[k + 1]
            k += 2
        else:
            options.setdefault("flags", []).append(word)
            k += 1
    return options


def elapse_seconds(text: str) -> int:
    parts = [int(p) for p in text.split(":")]
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + part
    return seconds


def fail(line: str) -> int:
    print(line, file=sys.stderr)
    return 1


def pjsub(args: list[str]) -> int:
    script_path = Path(args[-1])
    script = script_path.read_text()
    in_script = directives(script)
    misplaced = [word for word in in_script if word in COMMAND_LINE_ONLY]
    if misplaced:
        return fail(f"[ERR.] PJM 0001 pjsub Unknown option or no option argument: {misplaced[0]}.")
    options = parse_options(in_script + args[:-1])  # the command line wins [CR 3.1.14]
    if not options.get("group"):
        return fail("[ERR.] PJM 0071 pjsub Group not authorized to submit a job: group(59999)")
    if not any(item.startswith("PJM_LLIO_GFSCACHE=") for item in options["x"]) and \
            "--no-check-gfscache" not in options.get("flags", []):
        return fail("The current directory is contained in vol0005, so set PJM_LLIO_GFSCACHE to vol0005."
                    "(ex. -x PJM_LLIO_GFSCACHE=/vol0005)")
    resources = dict(item.split("=", 1) for entry in options["L"] for item in entry.split(","))
    elapse = elapse_seconds(resources.get("elapse", "60"))
    limit = int(os.environ.get("PJM_EMULATOR_MAX_ELAPSE", 86400))
    if elapse > limit:
        return fail(f"[ERR.] PJM 0057 pjsub elapse={elapse} is greater than the upper limit ({limit}).")
    with jobs_table() as table:
        accepted = sum(1 for job in table["jobs"].values() if job["st"] not in ENDED)
        if accepted >= int(os.environ.get("PJM_EMULATOR_ACCEPT_LIMIT", 100)):
            return fail("[ERR.] PJM 0072 pjsub Job exceeded the accept limit: ru-accept.")
        job_id = str(table["next"])
        table["next"] += 1
        name = options.get("name", script_path.name)
        table["jobs"][job_id] = {"name": name, "st": "QUE", "ec": "-", "pc": "-", "sn": "-", "pid": None,
                                 "cwd": os.getcwd(), "script": script, "elapse": elapse,
                                 "out": options.get("out", f"{name}.%j.out"),
                                 "err": options.get("err", f"{name}.%j.err"),
                                 "spath": options.get("spath", f"{name}.%j.stats"),
                                 "env": dict(item.split("=", 1) for entry in options["x"] for item in entry.split(","))}
    subprocess.Popen([sys.executable, __file__, "_run", job_id], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(f"[INFO] PJM 0000 pjsub Job {job_id} submitted.")
    return 0


def _run(job_id: str) -> int:
    """The detached runner of one job: RUN, the script, then EXT (or CCL after pjdel)."""
    with jobs_table() as table:
        job = table["jobs"][job_id]
        if job["st"] != "QUE":
            return 0  # deleted before it started
        job["st"] = "RUN"
        job["pid"] = os.getpid()
    cwd = Path(job["cwd"])
    out = cwd / job["out"].replace("%j", job_id)
    err = cwd / job["err"].replace("%j", job_id)
    out.parent.mkdir(parents=True, exist_ok=True)
    emulator = {key: value for key, value in os.environ.items() if key.startswith("PJM_EMULATOR")}
    env = {"PATH": f"{Path(__file__).parent}:/usr/local/bin:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/"),
           "PJM_JOBID": job_id, "PJM_JOBNAME": job["name"], "PJM_O_WORKDIR": str(cwd), **emulator, **job["env"]}
    started = time.time()
    with open(out, "w") as stdout, open(err, "w") as stderr:
        process = subprocess.Popen(["bash", "-c", job["script"]], cwd=cwd, env=env, stdout=stdout, stderr=stderr,
                                   start_new_session=True)
        with jobs_table() as table:
            table["jobs"][job_id]["pgid"] = process.pid
        try:
            code = process.wait(timeout=job["elapse"])
            pjm_code = "0"
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            code = process.wait()
            pjm_code = "11"  # ELAPSE LIMIT EXCEEDED
    if job["name"] == os.environ.get("PJM_EMULATOR_NODE_DOWN"):
        code, pjm_code = 0, "20"
    with jobs_table() as table:
        job = table["jobs"][job_id]
        if job["st"] == "CCL":
            return 0
        job.update(st="EXT", ec=str(max(code, 0)) if code >= 0 else "-", pc=pjm_code,
                   sn=str(-code) if code < 0 else "-")
        stats = cwd / job["spath"].replace("%j", job_id)
    stats.parent.mkdir(parents=True, exist_ok=True)
    stats.write_text(f"Job Statistical Information\nJOB ID                    : {job_id}\n"
                     f"JOB NAME                  : {job['name']}\nEXIT CODE                 : {job['ec']}\n"
                     f"PJM CODE                  : {job['pc']}\nELAPSE TIME (USE)         : "
                     f"{time.time() - started:.0f}\n")
    return 0


def pjstat(args: list[str]) -> int:
    history = "-H" in args
    choose = ["jid", "jnam", "st"]
    if "--choose" in args:
        choose = args[args.index("--choose") + 1].split(",")
    wanted = {a for a in args if re.fullmatch(r"\d+", a)}
    with jobs_table() as table:
        jobs = dict(table["jobs"])
    lines = ["  ".join(COLUMNS[c] for c in choose)]
    for job_id, job in jobs.items():
        if (job["st"] in ENDED) != history or (wanted and job_id not in wanted):
            continue
        values = {"jid": job_id, "jnam": job["name"], **{c: job[c] for c in ("st", "ec", "pc", "sn")}}
        lines.append("  ".join(values[c] for c in choose))
    print("\n".join(lines))
    return 0


def pjdel(args: list[str]) -> int:
    status = 0
    for job_id in args:
        with jobs_table() as table:
            job = table["jobs"].get(job_id)
            if job is None:
                print(f"[ERR.] PJM 0112 pjdel Job {job_id} does not exist.", file=sys.stderr)
                status = 1
                continue
            if job["st"] in ENDED:
                print(f"[ERR.] PJM 0113 pjdel Job {job_id} is not in the state that pjdel can be accepted.",
                      file=sys.stderr)
                status = 1
                continue
            job.update(st="CCL", pc="1")
            group = job.get("pgid")
        if group:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass
        print(f"[INFO] PJM 0100 pjdel Accepted job {job_id}.")
    return status


def mpiexec(args: list[str]) -> int:
    """Fujitsu MPI's output files around the real launcher (``$PJM_EMULATOR_MPIEXEC``)."""
    job_id = os.environ.get("PJM_JOBID", "0")
    counter = home() / f"mpiexec-{job_id}"
    with open(home() / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        count = int(counter.read_text()) + 1 if counter.exists() else 1
        counter.write_text(str(count))
    if "-std-proc" in args:
        k = args.index("-std-proc")
        out = err = f"{args[k + 1]}.{count}.%r"
        args = args[:k] + args[k + 2:]
    else:
        folder = Path(f"output.{job_id}/0/{count}")
        folder.mkdir(parents=True, exist_ok=True)
        out, err = f"{folder}/stdout.{count}.%r", f"{folder}/stderr.{count}.%r"
    launcher = os.environ["PJM_EMULATOR_MPIEXEC"]
    return subprocess.call([launcher, f"-outfile-pattern={out}", f"-errfile-pattern={err}", *args])


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    home().mkdir(parents=True, exist_ok=True)
    with open(home() / "calls.log", "a") as calls:  # what the executor asked, for the tests
        calls.write(f"{time.time():.3f} {command} {' '.join(rest)}\n")
    sys.exit({"pjsub": pjsub, "pjstat": pjstat, "pjdel": pjdel, "mpiexec": mpiexec, "_run": _run}[command](
        rest if command != "_run" else rest[0]))
