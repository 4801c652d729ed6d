"""Content hashes read a block at a time (supergcn.data.digests)."""

import hashlib

import numpy as np

from supergcn.data import digests
from supergcn.data.digests import file_digest


def test_file_digest_read_in_chunks_equals_the_hash_of_the_whole_file(tmp_path, monkeypatch):
    path = tmp_path / "blob.bin"
    data = np.random.default_rng(0).integers(0, 256, size=10_007, dtype=np.uint8).tobytes()
    path.write_bytes(data)
    monkeypatch.setattr(digests, "_HASH_CHUNK_BYTES", 1_000)  # ten full chunks and a short one
    assert file_digest(path) == hashlib.blake2b(data, digest_size=16).hexdigest()
    assert file_digest(path, 8) == hashlib.blake2b(data, digest_size=8).hexdigest()


def test_hash_arrays_read_in_blocks_equals_the_hash_of_names_dtypes_shapes_and_bytes(monkeypatch):
    rng = np.random.default_rng(1)
    arrays = {"b": rng.standard_normal((37, 5)).astype(np.float32), "a": np.arange(11, dtype=np.int64)}
    reference = hashlib.blake2b(digest_size=16)
    for name in ("a", "b"):
        reference.update(f"{name}|{arrays[name].dtype.str}|{arrays[name].shape}|".encode() + arrays[name].tobytes())
    seen = []
    monkeypatch.setattr(digests, "_HASH_BLOCK_BYTES", 3 * 5 * 4)  # three rows of b at a time
    assert digests.hash_arrays(arrays, lambda name, first, block: seen.append((name, first, len(block)))) \
        == reference.hexdigest()
    assert [first for name, first, _ in seen if name == "b"] == list(range(0, 37, 3))
