"""Downloads against a local HTTP server that serves byte ranges, as S3 does (``http_server``
in conftest)."""

import hashlib

import numpy as np
import pytest

from supergcn.data.download import download
from supergcn.errors import SuperGCNError

PAYLOAD = np.random.default_rng(0).bytes(3 * 2**20 + 12345)
MD5 = hashlib.md5(PAYLOAD).hexdigest()


def test_a_download_checks_its_checksum_and_lands_whole(tmp_path, http_server):
    url, files, ranges = http_server
    files["/data.bin"] = PAYLOAD
    path = download(f"{url}/data.bin", tmp_path / "data.bin", MD5)
    assert path.read_bytes() == PAYLOAD and ranges == [0]
    assert list(tmp_path.iterdir()) == [path]
    download(f"{url}/data.bin", tmp_path / "data.bin", MD5)  # present and whole: nothing fetched
    assert ranges == [0]


def test_an_interrupted_download_resumes_where_it_stopped(tmp_path, http_server):
    url, files, ranges = http_server
    files["/data.bin"] = PAYLOAD
    (tmp_path / "data.bin.part").write_bytes(PAYLOAD[:1_000_000])
    assert download(f"{url}/data.bin", tmp_path / "data.bin", MD5).read_bytes() == PAYLOAD
    assert ranges == [1_000_000]


def test_a_damaged_download_is_refused_and_removed(tmp_path, http_server):
    url, files, _ = http_server
    files["/data.bin"] = PAYLOAD[:-1] + b"x"
    with pytest.raises(SuperGCNError, match="arrived with another checksum than recorded"):
        download(f"{url}/data.bin", tmp_path / "data.bin", MD5)
    assert list(tmp_path.iterdir()) == []


def test_no_download_starts_without_the_space_for_it(tmp_path, http_server):
    url, files, ranges = http_server
    files["/data.bin"] = PAYLOAD
    with pytest.raises(SuperGCNError, match=r"no space for .*data\.bin: it needs .* more .* to unpack\) and .* free"):
        download(f"{url}/data.bin", tmp_path / "data.bin", MD5, extra_bytes=2**62)
    assert list(tmp_path.iterdir()) == []


def test_an_unreachable_source_names_where_to_put_the_file(tmp_path):
    with pytest.raises(SuperGCNError, match=r"could not download .* fetch it to .*data\.bin"):
        download("http://127.0.0.1:9/data.bin", tmp_path / "data.bin", MD5, timeout=5)
