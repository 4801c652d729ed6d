"""KaMinPar in a process of its own, so that the step's heartbeat keeps ticking.

KaMinPar's Python binding holds the interpreter lock (GIL) for the whole of
``load_graph`` and ``compute_partition``: called in the step's own process, no other
thread runs until it returns, and the heartbeat of :mod:`supergcn.progress` wrote a single
line, ``running for 01:10``, after the call on a products-shaped graph (METIS, called
through ctypes, releases the lock and shows a line every 30 s). So the step hands the
ParHIP file to a child Python process (``python -m supergcn.partition.kaminpar_process``)
and waits for it, which leaves the lock free:

* the child loads the file, reports ``loaded`` on a status pipe (the step then removes the
  file, tens of GB at the paper's sizes), partitions, writes the parts as a ``.npy`` file
  beside the graph file and reports its peak memory (``peak <MiB>``): with the step's own
  resident memory meanwhile, the step's peak while KaMinPar ran, which the manifest's
  peak takes where it is larger than the step process's own;
* the calls and their order are those the step made itself (reseed, solver, load,
  partition), so a seed gives the parts it gave;
* the child dies with the step (Linux's parent-death signal), and the step kills it when
  it stops for any other reason; a child that fails or is killed (the memory limit) is
  reported as one line naming its exit status or signal, never waited on beyond its end.

No graph array is copied: the child reads the file the step wrote in any case.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np

from supergcn.errors import SuperGCNError
from supergcn.progress import running

#: Allowed imbalance: KaMinPar's default, and METIS's (ufactor 30 = 3 %).
IMBALANCE = 0.03
_PR_SET_PDEATHSIG = 1
#: The directory holding the ``supergcn`` package the step runs, for the child's imports.
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def partition_file(graph_file: str | Path, parts_file: str | Path, num_parts: int, seed: int, threads: int,
                   preset: str, on_loaded=None) -> tuple[np.ndarray, float]:
    """KaMinPar's part of every node of the ParHIP file ``graph_file``, computed in a child
    process (module docstring), with the heartbeat of the step showing while it runs.

    Args:
        graph_file: the ParHIP file.
        parts_file: where the child writes the parts (``.npy``); removed here once read.
        num_parts: the number of parts, P.
        seed: KaMinPar's random seed.
        threads: KaMinPar's threads.
        preset: a KaMinPar preset (``kaminpar.context_names()``).
        on_loaded: called once the child has read ``graph_file`` (to remove it), or None.

    Returns:
        ``(parts, peak_mib)``: int32 part ids, one per node (parts may be empty), and the
        step's peak resident memory while the child ran, in MiB: this process's resident
        memory as it started the child (it only waits meanwhile) plus the child's peak.

    Raises:
        SuperGCNError: the child failed or was killed before it returned a partition.
    """
    read_end, write_end = os.pipe()
    command = [sys.executable, "-m", __name__, str(graph_file), str(parts_file), str(num_parts), str(seed),
               str(threads), preset, str(write_end), str(os.getpid())]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [_PACKAGE_ROOT,
                                                                              os.environ.get("PYTHONPATH")]))}
    waiting_mib = _resident_mib()
    with os.fdopen(read_end) as status:
        try:
            child = subprocess.Popen(command, pass_fds=(write_end,), env=environment)
        finally:
            os.close(write_end)  # else the pipe never ends when the child does
        try:
            with running("kaminpar: loading the ParHIP file"):
                loaded = status.readline() == "loaded\n"
            if loaded and on_loaded is not None:
                on_loaded()
            with running(f"kaminpar: {preset} partitioning into {num_parts:,} parts on {threads} threads"):
                report = status.readline()
                child.wait()
        finally:
            if child.poll() is None:  # the step stops (an interrupt, an error): so does KaMinPar
                child.kill()
                child.wait()
    try:
        if child.returncode != 0 or not report.startswith("peak "):
            raise SuperGCNError(_failure(child.returncode), "fix what it says above, or if it ran out of memory, "
                                "give the partition job more (Snakemake's mem_mb, a larger node)")
        return np.load(parts_file), waiting_mib + float(report.split()[1])
    finally:
        Path(parts_file).unlink(missing_ok=True)


def _resident_mib() -> float:
    """This process's resident memory now, in MiB (0 where there is no ``/proc``)."""
    with contextlib.suppress(OSError), open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _failure(returncode: int) -> str:
    """What a child's exit status says, in words."""
    if returncode < 0:
        return f"KaMinPar's process was killed by {signal.Signals(-returncode).name} before it returned a partition"
    return f"KaMinPar's process ended with exit status {returncode} before it returned a partition"


def _die_with_parent(parent: int) -> None:
    """Have Linux kill this process when the step's process ends; end at once if it has."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        sys.exit("kaminpar: the partition step ended before KaMinPar started")


def main(argv: list[str]) -> None:
    """The child: load, partition, write the parts, report (module docstring).

    Args:
        argv: the graph file, the parts file, P, the seed, the threads, the preset, the
            status pipe's descriptor and the step's process id.
    """
    graph_file, parts_file, num_parts, seed, threads, preset, status_fd, parent = argv
    _die_with_parent(int(parent))
    import kaminpar

    from supergcn.data.storage import peak_memory_mib

    with os.fdopen(int(status_fd), "w") as status:
        kaminpar.reseed(int(seed))
        solver = kaminpar.KaMinPar(int(threads), kaminpar.context_by_name(preset))
        loaded = kaminpar.load_graph(graph_file, kaminpar.GraphFileFormat.PARHIP,
                                     compress=preset.startswith("terapart"))
        print("loaded", file=status, flush=True)
        # The binding returns a Python list (about 36 B per node); it is converted and dropped at once.
        parts = np.array(solver.compute_partition(loaded, int(num_parts), IMBALANCE), dtype=np.int32)
        np.save(parts_file, parts)
        print(f"peak {peak_memory_mib()}", file=status, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
