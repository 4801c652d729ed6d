"""Downloads against a local HTTP server that serves byte ranges, as S3 does (``http_server``
in conftest)."""

import hashlib
import io
import shutil
import subprocess
import tarfile
import urllib.error
import zipfile

import numpy as np
import pytest

from supergcn.data import download as download_module
from supergcn.data.download import RemoteFile, download, download_all, read_md5sums, unpack
from supergcn.errors import SuperGCNError

PAYLOAD = np.random.default_rng(0).bytes(3 * 2**20 + 12345)
MD5 = hashlib.md5(PAYLOAD).hexdigest()


def test_a_download_checks_its_checksum_and_lands_whole(tmp_path, http_server):
    url, files, ranges = http_server
    files["/data.bin"] = PAYLOAD
    path = download(f"{url}/data.bin", tmp_path / "data.bin", MD5)
    assert path.read_bytes() == PAYLOAD and ranges == [0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.bin", "data.bin.md5"]
    # The record beside it is what md5sum itself checks.
    check = subprocess.run(["md5sum", "-c", "data.bin.md5"], cwd=tmp_path, capture_output=True, text=True)
    assert check.returncode == 0 and "data.bin: OK" in check.stdout
    download(f"{url}/data.bin", tmp_path / "data.bin", MD5)  # present and whole: nothing fetched
    assert ranges == [0]


def test_an_interrupted_download_resumes_where_it_stopped(tmp_path, http_server):
    url, files, ranges = http_server
    files["/data.bin"] = PAYLOAD
    (tmp_path / "data.bin.part").write_bytes(PAYLOAD[:1_000_000])
    assert download(f"{url}/data.bin", tmp_path / "data.bin", MD5).read_bytes() == PAYLOAD
    assert ranges == [1_000_000]
    # The checksum covers the bytes fetched before the interruption too.
    assert (tmp_path / "data.bin.md5").read_text().split()[0] == MD5


def test_a_damaged_download_is_refused_and_removed(tmp_path, http_server):
    url, files, _ = http_server
    files["/data.bin"] = PAYLOAD[:-1] + b"x"
    with pytest.raises(SuperGCNError, match="arrived with another checksum than recorded"):
        download(f"{url}/data.bin", tmp_path / "data.bin", MD5)
    assert list(tmp_path.iterdir()) == []


def test_no_download_starts_without_the_space_for_it(tmp_path, http_server):
    url, files, ranges = http_server
    files["/data.bin"] = PAYLOAD
    with pytest.raises(SuperGCNError, match=r"no space for .*data\.bin: it needs .* more .* to unpack or derive\) "
                                            r"and .* free"):
        download(f"{url}/data.bin", tmp_path / "data.bin", MD5, extra_bytes=2**62)
    assert list(tmp_path.iterdir()) == []


def test_an_unreachable_source_names_where_to_put_the_file(tmp_path):
    with pytest.raises(SuperGCNError, match=r"could not download .* fetch it to .*data\.bin"):
        download("http://127.0.0.1:9/data.bin", tmp_path / "data.bin", MD5, timeout=5)


def test_a_download_without_a_recorded_checksum_records_what_arrived(tmp_path, http_server):
    url, files, _ = http_server
    files["/data.bin"] = PAYLOAD
    (tmp_path / "data.bin.part").write_bytes(PAYLOAD[:777])
    download(f"{url}/data.bin", tmp_path / "data.bin")
    assert (tmp_path / "data.bin.md5").read_text() == f"{MD5}  data.bin\n"


def test_a_download_of_another_size_than_recorded_is_refused_and_removed(tmp_path, http_server):
    url, files, _ = http_server
    files["/data.bin"] = PAYLOAD + b"more"
    with pytest.raises(SuperGCNError, match=f"arrived with {len(PAYLOAD) + 4:,} bytes, not the {len(PAYLOAD):,} "
                                            "recorded"):
        download(f"{url}/data.bin", tmp_path / "data.bin", size=len(PAYLOAD))
    assert list(tmp_path.iterdir()) == []


def test_a_set_of_files_is_refused_before_any_starts_without_space_for_all(tmp_path, http_server, monkeypatch):
    """The first file would fit, both would not: nothing is fetched. The second file's
    size is what its server announces, the first's what is recorded."""
    url, files, ranges = http_server
    files["/a.bin"], files["/b.bin"] = PAYLOAD, PAYLOAD
    remotes = [RemoteFile(f"{url}/a.bin", "a.bin", MD5, len(PAYLOAD)), RemoteFile(f"{url}/b.bin", "sub/b.bin", MD5)]
    real = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(download_module.shutil, "disk_usage",
                        lambda path: real._replace(free=len(PAYLOAD) + len(PAYLOAD) // 2))
    with pytest.raises(SuperGCNError, match=r"no space for 2 files under .*: it needs 6\.0 MiB more "
                                            r"\(6\.0 MiB to download, 0 B to unpack or derive\) and 4\.5 MiB is free"):
        download_all(remotes, tmp_path)
    assert ranges == [] and list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    (tmp_path / "a.bin").write_bytes(PAYLOAD)  # present already: not fetched again
    assert [p.read_bytes() for p in download_all(remotes, tmp_path)] == [PAYLOAD, PAYLOAD]
    assert ranges == [0]


def test_md5sum_listings_are_read_as_md5sum_writes_them(tmp_path):
    (tmp_path / "x.graph").write_bytes(b"graph")
    (tmp_path / "x.properties").write_bytes(b"nodes=1")
    listing = subprocess.run(["md5sum", "x.graph", "-b", "x.properties"], cwd=tmp_path, capture_output=True,
                             text=True, check=True).stdout
    (tmp_path / "x.md5sums").write_text("# comment\n" + listing)
    assert read_md5sums(tmp_path / "x.md5sums") == {"x.graph": hashlib.md5(b"graph").hexdigest(),
                                                    "x.properties": hashlib.md5(b"nodes=1").hexdigest()}


@pytest.mark.parametrize("kind", ["zip", "tar.gz"])
def test_an_archive_unpacks_into_place_through_a_staging_folder(tmp_path, kind):
    archive = tmp_path / f"data.{kind}"
    if kind == "zip":
        with zipfile.ZipFile(archive, "w") as bundle:
            bundle.writestr("data/sub/a.txt", "a")
    else:
        with tarfile.open(archive, "w:gz") as bundle:
            info = tarfile.TarInfo("data/sub/a.txt")
            info.size = 1
            bundle.addfile(info, io.BytesIO(b"a"))
    (tmp_path / f"data.{kind}.md5").write_text(f"x  data.{kind}\n")
    root = tmp_path / "root"
    assert unpack(archive, root, "data") == root / "data"
    assert (root / "data" / "sub" / "a.txt").read_text() == "a"
    assert sorted(p.name for p in root.iterdir()) == ["data"] and not archive.exists()
    assert not (tmp_path / f"data.{kind}.md5").exists()


def test_an_archive_that_fails_to_unpack_leaves_nothing_a_loader_could_read(tmp_path):
    archive = tmp_path / "data.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("data/a.txt", "a" * 10_000)
        bundle.writestr("data/b.txt", "b" * 10_000)
    archive.write_bytes(archive.read_bytes().replace(b"b" * 100, b"c" * 100, 1))  # b.txt's CRC no longer matches
    root = tmp_path / "root"
    with pytest.raises(SuperGCNError, match=r"data\.zip could not be unpacked \(BadZipFile: .*\): it is damaged"):
        unpack(archive, root, "data")
    assert list(root.iterdir()) == [] and archive.exists()


def test_an_archive_is_not_unpacked_over_files_already_there(tmp_path):
    archive = tmp_path / "data.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("data/a.txt", "a")
    (tmp_path / "root" / "data").mkdir(parents=True)
    (tmp_path / "root" / "data" / "mine.txt").write_text("mine")
    with pytest.raises(SuperGCNError, match="already holds files"):
        unpack(archive, tmp_path / "root", "data")
    assert [p.name for p in (tmp_path / "root" / "data").iterdir()] == ["mine.txt"]


def test_a_server_that_answers_no_head_request_is_still_fetched_and_checked(tmp_path, http_server, monkeypatch):
    url, files, ranges = http_server
    files["/data.bin"] = PAYLOAD

    def refused(address, timeout):
        raise urllib.error.HTTPError(address, 405, "Method Not Allowed", {}, None)
    monkeypatch.setattr(download_module, "announced_size", refused)
    [path] = download_all([RemoteFile(f"{url}/data.bin", "data.bin", MD5)], tmp_path)
    assert path.read_bytes() == PAYLOAD and ranges == [0]


def test_an_unreachable_source_names_every_file_of_the_set_and_where_it_goes(tmp_path):
    remotes = [RemoteFile("http://127.0.0.1:9/a.bin", "a.bin"), RemoteFile("http://127.0.0.1:9/b.bin", "sub/b.bin")]
    with pytest.raises(SuperGCNError, match=r"to download 2 files — on a machine with internet fetch "
                                            r"http://127.0.0.1:9/a.bin to .*/a.bin; http://127.0.0.1:9/b.bin to "
                                            r".*/sub/b.bin, then run again"):
        download_all(remotes, tmp_path / "raw", timeout=5)
    assert not (tmp_path / "raw").exists()


@pytest.mark.parametrize("recorded", [{}, {"md5": MD5, "size": len(PAYLOAD)}])
def test_a_transfer_cut_short_keeps_its_part_and_the_next_run_resumes(tmp_path, http_server, recorded):
    """A dropped connection ends the read without an exception: the announced length shows
    it, whether or not a size or checksum is on record."""
    url, files, ranges = http_server
    files["/data.bin"] = PAYLOAD
    files.cut_after["/data.bin"] = 1_000_000
    with pytest.raises(SuperGCNError, match=r"was cut short \(1,000,000 of [\d,]+ bytes arrived\).* run again: it "
                                            "resumes"):
        download(f"{url}/data.bin", tmp_path / "data.bin", **recorded)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.bin.part"]
    del files.cut_after["/data.bin"]
    assert download(f"{url}/data.bin", tmp_path / "data.bin", **recorded).read_bytes() == PAYLOAD
    assert ranges == [0, 1_000_000] and (tmp_path / "data.bin.md5").read_text().split()[0] == MD5


def test_a_part_longer_than_the_source_is_removed_not_taken_for_the_file(tmp_path, http_server):
    url, files, _ = http_server
    files["/data.bin"] = PAYLOAD[:1000]
    (tmp_path / "data.bin.part").write_bytes(PAYLOAD[:5000])
    with pytest.raises(SuperGCNError, match=r"\(5,000 bytes\) is longer than .* \(1,000 bytes\)"):
        download(f"{url}/data.bin", tmp_path / "data.bin")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "data.bin.part").write_bytes(PAYLOAD[:1000])  # whole already: the 416 says so
    assert download(f"{url}/data.bin", tmp_path / "data.bin").read_bytes() == PAYLOAD[:1000]
