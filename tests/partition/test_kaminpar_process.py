"""KaMinPar runs in a process of its own: the step's heartbeat shows while it works, and a
child that fails, is killed or is left behind ends the step with one line, never a hang.

A fake ``kaminpar`` package stands in for the binding: like the real one it holds the
interpreter lock while it partitions (one long C call, ``sum(range(n))``), so a heartbeat
line written during the call proves that the call did not run in the step's process."""

import os
import sys
import textwrap
import time

import numpy as np
import pytest
from test_metis import grid_graph

from supergcn import progress
from supergcn.errors import SuperGCNError
from supergcn.partition.kaminpar_process import partition_file
from supergcn.partition.store import Engine, run_partition

#: Seconds the fake partitioner holds the interpreter lock.
HOLD_SECONDS = 1.0
FAKE = '''
    import os

    import numpy as np

    class GraphFileFormat:
        PARHIP = "parhip"

    def context_names():
        return {"fake"}

    def context_by_name(name):
        return name

    def reseed(seed):
        pass

    def load_graph(path, file_format, compress=False):
        return int(np.fromfile(path, dtype="<u8", count=2)[1])  # n, from the ParHIP header

    class KaMinPar:
        def __init__(self, threads, context):
            pass

        def compute_partition(self, n, k, imbalance):
            behaviour = os.environ["FAKE_KAMINPAR"]
            if "pid_file" in os.environ:
                with open(os.environ["pid_file"], "w") as pid_file:
                    pid_file.write(str(os.getpid()))
            if behaviour == "killed":
                os.kill(os.getpid(), 9)
            if behaviour == "fails":
                raise RuntimeError("the fake KaMinPar fails")
            sum(range(int(os.environ["FAKE_KAMINPAR_SUMS"])))  # holds the interpreter lock throughout
            return [v % k for v in range(n)]
'''


class Stopped(Exception):
    """The step stopping for a reason of its own."""


class Recorder:
    """A log file that notes when each line was written."""

    def __init__(self) -> None:
        self.lines: list[tuple[float, str]] = []

    def write(self, text: str) -> int:
        self.lines += [(time.monotonic(), line) for line in text.splitlines() if line]
        return len(text)

    def flush(self) -> None:
        pass


@pytest.fixture
def fake_kaminpar(tmp_path, monkeypatch):
    """The fake binding, for this process and KaMinPar's; sized to hold the lock for
    :data:`HOLD_SECONDS` on this machine."""
    home = tmp_path / "fake"
    (home / "kaminpar").mkdir(parents=True)
    (home / "kaminpar" / "__init__.py").write_text(textwrap.dedent(FAKE))
    monkeypatch.syspath_prepend(str(home))
    monkeypatch.delitem(sys.modules, "kaminpar", raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(home), os.environ.get("PYTHONPATH")])))
    started = time.perf_counter()
    sum(range(10**7))
    monkeypatch.setenv("FAKE_KAMINPAR_SUMS", str(int(10**7 * HOLD_SECONDS / (time.perf_counter() - started))))
    monkeypatch.setenv("FAKE_KAMINPAR", "slow")
    return home


def test_the_heartbeat_shows_while_kaminpar_partitions(fake_kaminpar, tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "LINE_SECONDS", 0.1)
    monkeypatch.setattr(progress, "QUIET_SECONDS", 0.05)
    log = Recorder()
    monkeypatch.setattr(sys, "stderr", log)
    graph = grid_graph(20, 5)
    manifest = run_partition(graph, "h", 4, tmp_path / "p", engine=Engine("kaminpar", preset="fake"))
    returned = time.monotonic()
    np.testing.assert_array_equal(np.load(tmp_path / "p" / "parts.npy"), np.arange(graph.num_nodes) % 4)
    during = [line for at, line in log.lines
              if "partitioning into 4 parts" in line and at < returned - HOLD_SECONDS / 2]
    assert during, f"no heartbeat while KaMinPar ran: {log.lines}"
    assert manifest["peak_memory_mib"] > 0


@pytest.mark.parametrize("behaviour, message", [("killed", "killed by SIGKILL"), ("fails", "exit status 1")])
def test_a_failed_kaminpar_is_one_line_and_leaves_nothing(fake_kaminpar, tmp_path, monkeypatch, capfd, behaviour,
                                                          message):
    monkeypatch.setenv("FAKE_KAMINPAR", behaviour)
    with pytest.raises(SuperGCNError, match=f"KaMinPar's process .*{message} before it returned a partition"):
        run_partition(grid_graph(20, 5), "h", 4, tmp_path / "p", engine=Engine("kaminpar", preset="fake"))
    assert sorted(path.name for path in tmp_path.iterdir()) == ["fake"], "a scratch file was left behind"
    if behaviour == "fails":
        assert "RuntimeError: the fake KaMinPar fails" in capfd.readouterr().err


def test_kaminpar_stops_with_the_step(fake_kaminpar, tmp_path, monkeypatch):
    """The step stops while KaMinPar works (here: when it is told the graph was read):
    KaMinPar's process is killed at once, not waited for."""
    from supergcn.partition.kaminpar import write_parhip

    monkeypatch.setenv("pid_file", str(tmp_path / "pid"))
    monkeypatch.setenv("FAKE_KAMINPAR_SUMS", str(int(os.environ["FAKE_KAMINPAR_SUMS"]) * 30))
    write_parhip(grid_graph(20, 5), tmp_path / "g.parhip")

    def interrupted():
        while not (tmp_path / "pid").exists() or not (tmp_path / "pid").read_text():
            time.sleep(0.01)
        raise Stopped

    started = time.monotonic()
    with pytest.raises(Stopped):
        partition_file(tmp_path / "g.parhip", tmp_path / "parts.npy", 4, 0, 1, "fake", on_loaded=interrupted)
    assert time.monotonic() - started < 10 * HOLD_SECONDS
    with pytest.raises(ProcessLookupError):
        os.kill(int((tmp_path / "pid").read_text()), 0)
