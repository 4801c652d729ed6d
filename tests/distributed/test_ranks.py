"""A job's ranks: a failing rank aborts the job with its message, and leaves none of MPICH's
shared memory behind in /dev/shm, however the job ends."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from supergcn.distributed import comm as comm_module
from supergcn.distributed.comm import unlink_shared_memory

from conftest import mpiexec, run_rank_job

JOB = Path(__file__).with_name("ranks_job.py")


def mapped_segments(output: str) -> list[Path]:
    return [Path(path) for path in re.findall(r"rank \d+ maps (\S+)", output)]


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="no /proc: nothing names the mapped files")
def test_a_failing_rank_aborts_the_job_and_leaves_no_shared_memory_file():
    result = subprocess.run([mpiexec(), "-n", "2", sys.executable, str(JOB), "fail"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "rank 1 of 2: error" in result.stderr and "this rank fails on purpose" in result.stderr
    segments = mapped_segments(result.stdout)
    if not segments:
        pytest.skip("this MPI keeps no named shared memory in /dev/shm (not MPICH's mmap segments)")
    assert [path for path in segments if path.exists()] == []


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="no /proc: nothing names the mapped files")
def test_a_job_whose_segments_are_unlinked_early_still_ends_well():
    output = run_rank_job(JOB, 2, timeout=120, args=["ok"])
    assert [path for path in mapped_segments(output) if path.exists()] == []


class OneRank:
    def __init__(self):
        self.barriers = 0

    def Barrier(self):
        self.barriers += 1


def test_only_the_mapped_segments_still_linked_are_unlinked_after_every_rank_has_attached(tmp_path, monkeypatch):
    prefix = tmp_path / "mpich_shm_"
    monkeypatch.setattr(comm_module, "MPICH_SEGMENT_PREFIX", str(prefix))
    live, gone, unmapped, other = (tmp_path / name for name in ("mpich_shm_1_0", "mpich_shm_2_0", "mpich_shm_3_0",
                                                                 "ucx_shm_posix_4"))
    for path in (live, unmapped, other):
        path.write_bytes(b"\0")
    maps = tmp_path / "maps"
    maps.write_text(f"7f00-7f10 rw-s 00000000 00:1a 11 {live}\n"
                    f"7f10-7f20 rw-s 00000000 00:1a 11 {live}\n"
                    f"7f20-7f30 rw-s 00000000 00:1a 12 {gone} (deleted)\n"
                    f"7f30-7f40 rw-s 00000000 00:1a 13 {other}\n"
                    "7f40-7f50 r-xp 00000000 08:01 14 /usr/lib/libc.so.6\n"
                    "7f50-7f60 rw-p 00000000 00:00 0 \n")
    comm = OneRank()
    assert unlink_shared_memory(comm, maps=str(maps)) == [str(live)]
    assert comm.barriers == 1
    assert not live.exists() and unmapped.exists() and other.exists()
    assert unlink_shared_memory(comm, maps=str(tmp_path / "no-maps")) == []
