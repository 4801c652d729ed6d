"""Raw files checked against what their sources published (supergcn/data/published.py): the
real files pass and the manifest says what was checked; a file cut short, a line dropped or
a features file of another graph is refused in one line naming the file and the fix, and
nothing is written; --accept-source-changes reads a deliberate variant and records it."""

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from supergcn.data.published import COUNTS, PUBLISHED, check_counts
from supergcn.errors import SuperGCNError

from conftest import run_cli


def test_the_recorded_digests_are_the_shared_files(shared_datasets):
    """The digests recorded here are those ../shared/datasets/SHA256SUMS lists, file by file."""
    listed = {line.split()[1].removeprefix("./"): line.split()[0]
              for line in (shared_datasets / "SHA256SUMS").read_text().splitlines() if line.strip()}
    folders = {"cora": "planetoid", "citeseer": "planetoid", "facebook": "facebook_page_page"}
    recorded = {f"{folders[name]}/{relative}": digest for name in folders
                for relative, digest in PUBLISHED[name].files.items()}
    assert recorded == {path: digest for path, digest in listed.items() if path in recorded}
    assert len(recorded) == 8 + 8 + 3
    for path, digest in recorded.items():
        assert hashlib.sha256((shared_datasets / path).read_bytes()).hexdigest() == digest


@pytest.fixture
def facebook_copy(shared_datasets, tmp_path) -> Path:
    """A writable copy of the published Facebook files under a raw root of its own."""
    raw = tmp_path / "raw" / "facebook_page_page" / "raw"
    shutil.copytree(shared_datasets / "facebook_page_page" / "raw", raw)
    for path in raw.iterdir():
        path.chmod(0o644)
    return raw


def prepare(raw: Path, out: Path, *extra):
    return run_cli("prepare", "facebook", "--raw-root", raw.parents[1], "--out", out, *extra)


def test_the_published_files_are_prepared_and_the_manifest_says_what_was_checked(facebook_copy, tmp_path):
    result = prepare(facebook_copy, tmp_path / "g")
    assert result.returncode == 0, result.stderr
    check = json.loads((tmp_path / "g" / "meta.json").read_text())["provenance"]["source_check"]
    assert check["accepted_changes"] is False
    assert all(entry["published"] for entry in check["files"].values()) and len(check["files"]) == 3
    assert check["counts"] == {"nodes": {"found": 22470, "published": 22470},
                               "edges": {"found": 171002, "published": 171002},
                               "features": {"found": 4714, "published": 4714},
                               "classes": {"found": 4, "published": 4}}


def cut_mid_line(raw: Path) -> None:
    path = raw / "facebook_edges.csv"
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2 + 3])  # as a copy cut off leaves it: in the middle of a line


def drop_a_line(raw: Path) -> None:
    path = raw / "facebook_edges.csv"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:100] + lines[101:]))


def other_features(raw: Path) -> None:
    features = json.loads((raw / "facebook.json").read_text())
    (raw / "facebook.json").write_text(json.dumps({node: ids[:-1] or ids for node, ids in features.items()}))


@pytest.mark.parametrize("damage, file", [(cut_mid_line, "facebook_edges.csv"), (drop_a_line, "facebook_edges.csv"),
                                          (other_features, "facebook.json")])
def test_a_raw_file_other_than_the_published_one_is_refused_naming_it(facebook_copy, tmp_path, damage, file):
    damage(facebook_copy)
    result = prepare(facebook_copy, tmp_path / "g")
    assert result.returncode == 2 and result.stderr.count("error:") == 1, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert f"{facebook_copy / file} is not the file MUSAE's facebook_large archive" in line
    assert "download https://snap.stanford.edu/data/facebook_large.zip again" in line
    assert "--accept-source-changes" in line
    assert not (tmp_path / "g").exists()


def test_a_deliberate_variant_is_read_and_recorded_as_one(facebook_copy, tmp_path):
    drop_a_line(facebook_copy)
    result = prepare(facebook_copy, tmp_path / "g", "--accept-source-changes")
    assert result.returncode == 0, result.stderr
    check = json.loads((tmp_path / "g" / "meta.json").read_text())["provenance"]["source_check"]
    assert check["accepted_changes"] is True
    assert not check["files"]["raw/facebook_edges.csv"]["published"]
    assert check["files"]["raw/facebook.json"]["published"]
    assert check["counts"]["edges"] == {"found": 171001, "published": 171002}


def test_counts_other_than_the_published_ones_are_refused_with_each_count_named(tmp_path):
    found = {"nodes": 2708, "edges": 5277, "features": 1433, "classes": 6}
    with pytest.raises(SuperGCNError, match=r"cora read from .* has 5,277 undirected edges, not the published 5,278; "
                                        r"6 classes, not the published 7"):
        check_counts("cora", found, tmp_path)
    recorded = check_counts("cora", found, tmp_path, accept_changes=True)
    assert set(recorded) == set(COUNTS) and recorded["classes"] == {"found": 6, "published": 7}
    assert check_counts("synthetic-tiny", found, tmp_path) == {}  # generated: nothing published
