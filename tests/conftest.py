"""Shared fixtures: the offline real datasets beside the checkout, and small graphs."""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SNAKEMAKE = str(BIN / "snakemake")
SHARED_DATASETS = Path(os.environ.get("SUPERGCN_SHARED_DATASETS", REPO.parent / "shared" / "datasets"))
#: The test files that take longest, longest first (``make test`` lists its slowest tests).
#: ``make test`` hands whole files to its two workers as they free up, in the order of the
#: run (``--no-loadscope-reorder``; pytest-xdist would put the files of most tests first,
#: and a long file of a few tests, such as the docs build, last). These run first, so that
#: the many short files even out the workers at the end instead of one long file keeping
#: one busy while the other has nothing left.
LONGEST_FILES = (
    "cluster/test_slurm.py", "train/test_trainer.py", "kernels/test_targets.py", "cli/test_bad_inputs.py",
    "workflow/test_workflow.py", "train/test_models.py", "cluster/test_pjm_emulated.py", "workflow/test_own_graph.py",
    "methods/test_bnsgcn.py", "methods/test_distgnn.py", "cli/test_cli.py", "test_getting_started.py",
    "workflow/test_dry_runs.py", "methods/test_adaqp.py", "methods/test_pipegcn.py", "test_docs.py",
    "models/test_inputs.py", "data/datasets/test_own_arrays.py", "test_sources.py", "methods/test_distgnn_mb.py",
    "test_printed_commands.py", "test_outputs_page.py",
)


def pytest_configure(config):
    """Settle torch's MKL vector math before any test runs it on two threads: a process's
    first VML call can race between them (supergcn.distributed.threads), and the tests that
    compare bits or outputs in this process must not meet it."""
    from supergcn.distributed.threads import settle_mkl_vml_dispatch

    settle_mkl_vml_dispatch()


def pytest_collection_modifyitems(config, items):
    """The tests of :data:`LONGEST_FILES` first, file by file in that order; the others
    after them in their own order (tests/test_layout.py holds the list to files that exist)."""
    rank = {Path(__file__).parent / name: index for index, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path, len(rank)))


def skip_where_the_shared_datasets_are_missing(output: str) -> None:
    """Skip a test whose command was refused because a study's raw files (../shared/datasets)
    are not beside the checkout, as a study is refused on a machine without them."""
    if "raw_root: " in output and "does not exist" in output and not (SHARED_DATASETS / "planetoid").is_dir():
        pytest.skip(f"real datasets not found at {SHARED_DATASETS}: the study's config names their raw files")


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    """The read-only real datasets (../shared/datasets); tests using them skip without it."""
    if not (SHARED_DATASETS / "planetoid" / "Cora" / "raw").is_dir():
        pytest.skip(f"real datasets not found at {SHARED_DATASETS} (set SUPERGCN_SHARED_DATASETS)")
    return SHARED_DATASETS


@pytest.fixture(scope="session")
def cora(shared_datasets):
    from supergcn.data.datasets import prepare_dataset
    return prepare_dataset("cora", shared_datasets)


@pytest.fixture(scope="session")
def facebook(shared_datasets):
    from supergcn.data.datasets import prepare_dataset
    return prepare_dataset("facebook", shared_datasets)


def awkward_edge_list(num_nodes: int = 300, seed: int = 0):
    """Edges with duplicates, one-directional edges, self loops and isolated nodes."""
    rng = np.random.default_rng(seed)
    active = num_nodes - 20  # the last 20 nodes stay isolated
    src = rng.integers(0, active, 4 * num_nodes)
    dst = np.where(rng.random(len(src)) < 0.5, src + rng.integers(-5, 6, len(src)), rng.integers(0, active, len(src)))
    dst = np.clip(dst, 0, active - 1)
    src = np.concatenate([src, src[:50], [3, 7, 7]])  # duplicates and self loops
    dst = np.concatenate([dst, dst[:50], [3, 7, 7]])
    return src, dst


@pytest.fixture
def awkward_graph():
    from supergcn.data.graph import build_graph, random_split

    n = 300
    src, dst = awkward_edge_list(n)
    rng = np.random.default_rng(1)
    masks = random_split(n, (0.5, 0.25, 0.25), seed=2)
    return build_graph("awkward", src, dst, rng.standard_normal((n, 6)), rng.integers(0, 3, n), *masks)


def run_cli(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "supergcn.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd)


def assert_prepare_refused(dataset: str, raw_root: Path, out: Path, message: str) -> None:
    """``supergcn prepare dataset`` from a damaged source ends in one line naming the
    problem (``message``), exit status 2, and writes nothing."""
    result = run_cli("prepare", dataset, "--raw-root", raw_root, "--out", out)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.count("error:") == 1 and message in result.stderr, result.stderr
    assert not out.exists()


def snakemake_environment(env_extra=None) -> dict[str, str]:
    """This environment with the venv's bin/ first on PATH, one thread per process, and
    ``env_extra``."""
    return {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "OMP_NUM_THREADS": "1", **(env_extra or {})}


def snakemake(*args, cwd=REPO, env_extra=None, timeout=600) -> subprocess.CompletedProcess:
    """The venv's Snakemake in :func:`snakemake_environment`."""
    return subprocess.run([SNAKEMAKE, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          env=snakemake_environment(env_extra), timeout=timeout)


#: The program of :func:`snakemake_each`'s server. It imports Snakemake and parses every
#: package module for the source hashes (:func:`supergcn.sources.code_of`, cached by path,
#: modification time and size, so an edited file is parsed again) once: most of the CPU
#: time of a dry run. Then it forks a child per command, which runs the ``snakemake``
#: launcher as a process of its own would, with the command's arguments, working folder,
#: environment and time limit (SIGALRM), its output into two files; it prints the exit
#: statuses, a negative one for the signal that ended a child.
SNAKEMAKE_SERVER = r"""
import json, os, runpy, signal, sys, traceback
import snakemake.cli
from supergcn import sources

for path in sources.PACKAGE_DIR.rglob("*.py"):
    parts = path.relative_to(sources.PACKAGE_DIR).with_suffix("").parts
    sources.imported_modules(path, ".".join((sources.PACKAGE, *parts)).removesuffix(".__init__"))
    sources.code_of(path)


def run(job):
    for fd, name in ((1, job["stdout"]), (2, job["stderr"])):
        os.dup2(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    sys.argv = list(job["argv"])
    signal.alarm(job["timeout"])
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
        return 0
    except SystemExit as exit:  # as the interpreter ends: a message is printed, status 1
        if exit.code is None or isinstance(exit.code, int):
            return exit.code or 0
        print(exit.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1


jobs, workers = json.load(sys.stdin), int(sys.argv[1])
running, statuses = {}, [None] * len(jobs)
for index, job in enumerate(jobs + [None] * workers):
    while running and (len(running) >= workers or job is None):
        pid, status = os.wait()
        statuses[running.pop(pid)] = os.waitstatus_to_exitcode(status)
    if job is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                status = run(job)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(status)
        running[pid] = index
print(json.dumps(statuses))
"""


def snakemake_each(commands: list[tuple[list, dict[str, str], Path]], root: Path, timeout: int = 300,
                   workers: int = 4) -> list[subprocess.CompletedProcess]:
    """Each ``(arguments, environment, folder)`` run as ``snakemake ARGUMENTS`` in that folder
    with that environment alone, ``workers`` at a time, as by :func:`subprocess.run`, but
    forked from one process that has imported Snakemake and parsed the package's sources
    (:data:`SNAKEMAKE_SERVER`) rather than started afresh. The commands share one
    ``PYTHONPATH`` (the package the server imports is theirs), and Snakemake locks its
    working folder: commands that run at once need folders of their own. Their output goes
    to files under ``root``. A command still running after ``timeout`` seconds is killed
    (status -14)."""
    # The children run the package the server imported, found through the commands' PYTHONPATH.
    python_paths = {env.get("PYTHONPATH") for _, env, _ in commands}
    assert len(python_paths) <= 1, f"the commands of one call share one PYTHONPATH, not {python_paths}"
    root.mkdir(parents=True, exist_ok=True)
    jobs = [{"argv": [SNAKEMAKE, *map(str, arguments)], "env": env, "cwd": str(cwd), "timeout": timeout,
             "stdout": str(root / f"{index}.out"), "stderr": str(root / f"{index}.err")}
            for index, (arguments, env, cwd) in enumerate(commands)]
    server_env = {key: value for key, value in os.environ.items()
                  if not key.startswith("SNAKEMAKE") and key != "PYTHONPATH"}
    server_env["PATH"] = f"{BIN}:{os.environ['PATH']}"
    if next(iter(python_paths), None):
        server_env["PYTHONPATH"] = next(iter(python_paths))
    server = subprocess.run([sys.executable, "-c", SNAKEMAKE_SERVER, str(workers)], input=json.dumps(jobs),
                            capture_output=True, text=True, env=server_env, timeout=timeout * len(jobs) + 120)
    assert server.returncode == 0, server.stderr[-4000:]
    statuses = json.loads(server.stdout.splitlines()[-1])
    return [subprocess.CompletedProcess(job["argv"], status, Path(job["stdout"]).read_text(),
                                        Path(job["stderr"]).read_text()) for job, status in zip(jobs, statuses)]


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


def copy_workflow(destination: Path) -> Path:
    """The Snakefile, workflow/ and config/ copied to ``destination``, to run a study there."""
    destination.mkdir(parents=True)
    shutil.copy(REPO / "Snakefile", destination)
    for folder in ("workflow", "config"):
        shutil.copytree(REPO / folder, destination / folder)
    return destination


def mpiexec() -> str:
    """The MPI launcher beside this interpreter (the mpich wheel's), else the one on PATH."""
    beside = BIN / "mpiexec"
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if found is None:
        pytest.skip("no mpiexec found (install the mpich wheel or a system MPI)")
    return found


def run_mpi(num_ranks: int, *args, timeout: float = 240) -> subprocess.CompletedProcess:
    """``mpiexec -n P python -m supergcn.cli ARGS`` with one thread per rank; a hang fails
    the test through the timeout instead of blocking the suite."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([mpiexec(), "-n", str(num_ranks), sys.executable, "-m", "supergcn.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=env)


def run_rank_job(script: Path, num_ranks: int, timeout: float = 240, args=()) -> str:
    """Run a test job script (with ``args``) under ``mpiexec -n num_ranks``; it must end well
    on every rank, each printing ``rank R ok``. Returns its output."""
    result = subprocess.run([mpiexec(), "-n", str(num_ranks), sys.executable, str(script), *map(str, args)],
                            capture_output=True,
                            text=True, timeout=timeout, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    # Ranks share stdout, so their lines may interleave: count the reports, not the lines.
    assert sorted(re.findall(r"rank \d+ ok", result.stdout)) == sorted(f"rank {r} ok" for r in range(num_ranks))
    return result.stdout


@pytest.fixture(scope="module")
def tiny_plans(tmp_path_factory):
    """synthetic-tiny partitioned in two, with its pre and hybrid plans and the hybrid plan
    weighed for GAT (through the CLI)."""
    root = tmp_path_factory.mktemp("plans")
    assert run_cli("prepare", "synthetic-tiny", "--out", root / "graph").returncode == 0
    assert run_cli("partition", "--graph", root / "graph", "--parts", 2, "--out", root / "P2").returncode == 0
    for name, options in (("pre", ["pre"]), ("hybrid", ["hybrid"]), ("hybrid-gat", ["hybrid", "--model", "gat"])):
        result = run_cli("plan", "--graph", root / "graph", "--partition", root / "P2", "--strategy", *options,
                         "--out", root / f"P2-{name}")
        assert result.returncode == 0, result.stderr
    return root


@pytest.fixture
def roomy_disk(monkeypatch):
    """Downloads see a petabyte free: a test of what follows a published size's download
    (tens of GB of features to derive) need not depend on the disk it runs on."""
    from supergcn.data import download

    real = download.shutil.disk_usage
    monkeypatch.setattr(download.shutil, "disk_usage", lambda path: real(path)._replace(free=2**50))


class ServedFiles(dict):
    """``path: bytes`` served by :func:`http_server`; ``cut_after[path] = n`` sends only the
    first n bytes of a response (its full length announced) and drops the connection."""

    def __init__(self):
        super().__init__()
        self.cut_after: dict[str, int] = {}


@pytest.fixture
def http_server():
    """Serves ``files[path]`` as S3 does: byte ranges (206 with ``Content-Range``; 416 with
    the length past the end), HEAD requests; records the start of each GET."""
    files, ranges = ServedFiles(), []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):
            body = files.get(self.path)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()

        def do_GET(self):
            body = files.get(self.path)
            if body is None:
                self.send_error(404)
                return
            asked = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
            start = int(asked.group(1)) if asked else 0
            ranges.append(start)
            if start >= len(body):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206 if asked else 200)
            if asked:
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            self.send_header("Content-Length", str(len(body) - start))
            self.end_headers()
            self.wfile.write(body[start:start + files.cut_after.get(self.path, len(body))])
            if self.path in files.cut_after:
                self.close_connection = True

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", files, ranges
    httpd.shutdown()
