"""Streaming file hashes and released memory-mapped pages (supergcn.data.storage)."""

import hashlib
import sys

import numpy as np
import pytest

from supergcn.data import storage
from supergcn.data.storage import file_digest, release_pages


def test_file_digest_read_in_chunks_equals_the_hash_of_the_whole_file(tmp_path, monkeypatch):
    path = tmp_path / "blob.bin"
    data = np.random.default_rng(0).integers(0, 256, size=10_007, dtype=np.uint8).tobytes()
    path.write_bytes(data)
    monkeypatch.setattr(storage, "_HASH_CHUNK_BYTES", 1_000)  # ten full chunks and a short one
    assert file_digest(path) == hashlib.blake2b(data, digest_size=16).hexdigest()
    assert file_digest(path, 8) == hashlib.blake2b(data, digest_size=8).hexdigest()


def _resident_file_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssFile:"))


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
