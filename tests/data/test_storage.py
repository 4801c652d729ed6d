"""Atomic outputs and released memory-mapped pages (supergcn.data.storage)."""

import errno
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from supergcn.data.storage import (
    atomic_file,
    atomic_output_dir,
    files_written_together,
    release_pages,
    write_text,
)
from supergcn.errors import SuperGCNError


def _resident_file_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssFile:"))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux's /proc")
def test_a_process_reports_its_own_peak_not_the_peak_of_the_process_that_started_it():
    """Linux keeps a parent's ``ru_maxrss`` across fork and exec: a step started by a
    process holding 600 MiB would report at least that (checked here, so the test can
    fail) where its own program peaks at a few tens of MiB."""
    import resource
    import subprocess

    held = np.ones(600 * 2**20 // 8)
    script = ("import resource; from supergcn.data.storage import peak_memory_mib; "
              "print(peak_memory_mib(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)")
    own, inherited = map(float, subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                               check=True).stdout.split())
    assert inherited >= 600 and held.sum() > 0
    assert own < 200 and own < resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads RssFile from /proc/self/status (Linux)")
def test_released_pages_leave_the_resident_set_and_read_back_unchanged(tmp_path):
    values = np.arange(16 * 2**20 // 8, dtype=np.int64)  # 16 MiB
    np.save(tmp_path / "values.npy", values)
    mapped = np.load(tmp_path / "values.npy", mmap_mode="r")
    before = _resident_file_kib()
    assert int(mapped.sum()) == int(values.sum())  # touches every page
    touched = _resident_file_kib()
    release_pages(mapped[10:20])  # a view: the whole mapping is released
    released = _resident_file_kib()
    assert touched - before > 12 * 1024
    assert touched - released > 12 * 1024
    np.testing.assert_array_equal(mapped, values)


def test_arrays_in_memory_are_left_alone():
    values = np.arange(1000)
    release_pages(values, values[3:7])
    np.testing.assert_array_equal(values, np.arange(1000))


def _disk_full() -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_while_writing_a_directory_is_one_error_and_leaves_nothing(tmp_path):
    destination = tmp_path / "plans" / "P4"
    with pytest.raises(SuperGCNError) as refused:
        with atomic_output_dir(destination, "plan.json") as staging:
            (staging / "rank_00000.npz").write_bytes(b"x" * 3 * 2**20)
            raise _disk_full()  # what the next write would meet on a full device
    message = str(refused.value)
    assert f"no space left for {destination}: the step had written 3.0 MiB" in message
    assert "free there now" in message and "write the output elsewhere" in message
    assert "\n" not in message
    assert sorted(p.name for p in (tmp_path / "plans").iterdir()) == []


def test_a_full_disk_while_writing_a_file_is_one_error_and_leaves_nothing(tmp_path):
    target = tmp_path / "table.csv"
    with pytest.raises(SuperGCNError, match=r"no space left for .*table\.csv: the step had written 5 B"):
        with atomic_file(target) as tmp:
            tmp.write_bytes(b"a,b\n1")
            raise _disk_full()
    assert list(tmp_path.iterdir()) == []


def test_other_write_errors_pass_through_unchanged(tmp_path):
    with pytest.raises(PermissionError):
        with atomic_output_dir(tmp_path / "out", "plan.json"):
            raise PermissionError(errno.EACCES, "denied")
    assert list(tmp_path.iterdir()) == []


def test_files_written_together_fall_together(tmp_path):
    """A failing step that writes several files into a shared directory removes the ones it
    wrote (new or replaced), keeps the others, and removes the directory if it made it."""
    shared = tmp_path / "tables"
    shared.mkdir()
    write_text(shared / "other_step.csv", "kept")
    write_text(shared / "replaced.csv", "old")
    with pytest.raises(RuntimeError):
        with files_written_together(shared):
            write_text(shared / "replaced.csv", "new")
            write_text(shared / "new.csv", "new")
            raise RuntimeError("the third table failed")
    assert sorted(p.name for p in shared.iterdir()) == ["other_step.csv"]
    fresh = tmp_path / "figures"
    with pytest.raises(RuntimeError):
        with files_written_together(fresh):
            write_text(fresh / "a.png", "x")
            raise RuntimeError("the second figure failed")
    assert not fresh.exists()
    with files_written_together(shared):
        write_text(shared / "done.csv", "y")
    assert (shared / "done.csv").read_text() == "y"


def test_an_output_may_replace_only_an_earlier_output_of_its_step(tmp_path, monkeypatch):
    """Missing, empty, or holding the step's manifest: replaceable. Another step's output or
    a folder of the user's, and the working directory or one above it: refused."""
    from supergcn.data.storage import check_replaceable

    (tmp_path / "empty").mkdir()
    (tmp_path / "plan").mkdir()
    (tmp_path / "plan" / "plan.json").write_text("{}")
    (tmp_path / "graph").mkdir()
    (tmp_path / "graph" / "meta.json").write_text("{}")
    for allowed in ("missing", "empty", "plan"):
        check_replaceable(tmp_path / allowed, "plan.json")
    with pytest.raises(SuperGCNError, match="graph holds files but no plan.json"):
        check_replaceable(tmp_path / "graph", "plan.json")
    monkeypatch.chdir(tmp_path / "empty")
    for here in (".", ".."):
        with pytest.raises(SuperGCNError, match="is the working directory or holds it"):
            check_replaceable(here, "plan.json")
