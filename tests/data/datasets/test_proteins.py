"""Proteins from a Matrix Market file in the layout of HipMCL's (written here), against
scipy's own reader."""

import hashlib
import json

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from supergcn.cli import main
from supergcn.data.datasets import proteins
from supergcn.data.graph import load_graph
from supergcn.errors import SuperGCNError

from conftest import assert_prepare_refused, run_cli

NODES, ENTRIES = 3_000, 12_000


def proteins_fixture(root, symmetric=True):
    """A square pattern matrix, one triangle when ``symmetric``, with comment lines."""
    rng = np.random.default_rng(5)
    rows, cols = rng.integers(0, NODES, (2, ENTRIES))
    if symmetric:
        rows, cols = np.maximum(rows, cols), np.minimum(rows, cols)
    matrix = sp.coo_matrix((np.ones(ENTRIES), (rows, cols)), shape=(NODES, NODES))
    root.mkdir(parents=True)
    path = root / proteins.FILE
    scipy.io.mmwrite(path, matrix, comment="HipMCL isolate network fixture\nsecond comment line", field="pattern",
                     symmetry="symmetric" if symmetric else "general")
    return path


@pytest.mark.parametrize("symmetric", [True, False])
def test_proteins_prepares_end_to_end(tmp_path, symmetric):
    path = proteins_fixture(tmp_path / "raw" / "proteins", symmetric)
    result = run_cli("prepare", "proteins", "--raw-root", tmp_path / "raw", "--out", tmp_path / "g")
    assert result.returncode == 0, result.stderr
    graph = load_graph(tmp_path / "g")
    reference = scipy.io.mmread(path).tocsr()  # scipy mirrors a symmetric file itself
    reference = ((reference + reference.T) > 0).tocsr()
    reference.sort_indices()
    np.testing.assert_array_equal(graph.indptr, reference.indptr)
    np.testing.assert_array_equal(graph.indices, reference.indices)
    # DistGNN's split in id order, scaled to 3,000 nodes: 343 train, 172 test, 2 validation.
    assert np.flatnonzero(graph.train_mask).tolist() == list(range(343))
    assert np.flatnonzero(graph.test_mask).tolist() == list(range(343, 515))
    assert np.flatnonzero(graph.val_mask).tolist() == [515, 516]
    meta = json.loads((tmp_path / "g" / "meta.json").read_text())
    assert meta["feature_dim"] == proteins.FEATURES and "made_up" in meta["provenance"]
    if symmetric:
        assert meta["hash"] == "49de19e6e80c9f74ff80af187f0504ae"


@pytest.mark.parametrize("damage, message", [
    (lambda path: path.write_text(path.read_text()[:len(path.read_text()) // 2].rsplit("\n", 1)[0] + "\n"),
     "entries, not the 12,000 its size line announces"),
    (lambda path: path.write_text("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n"),
     "is not a Matrix Market coordinate matrix"),
])
def test_a_damaged_proteins_file_is_one_line(tmp_path, damage, message):
    damage(proteins_fixture(tmp_path / "raw" / "proteins"))
    assert_prepare_refused("proteins", tmp_path / "raw", tmp_path / "g", message)


def test_proteins_are_fetched_whole_and_what_arrived_is_recorded(tmp_path, http_server, monkeypatch):
    url, files, _ = http_server
    body = proteins_fixture(tmp_path / "source").read_bytes()
    files[f"/{proteins.FILE}"] = body
    monkeypatch.setattr(proteins, "SOURCE_URL", f"{url}/{proteins.FILE}")
    monkeypatch.setattr(proteins, "PUBLISHED_NODES", NODES)
    assert main(["prepare", "proteins", "--raw-root", tmp_path / "raw", "--out", tmp_path / "g"]) == 0
    meta = json.loads((tmp_path / "g" / "meta.json").read_text())
    assert meta["provenance"]["md5"] == hashlib.md5(body).hexdigest()
    assert meta["hash"] == "49de19e6e80c9f74ff80af187f0504ae"  # the graph of the same file put there by hand


def test_a_proteins_download_of_another_size_than_published_is_kept_aside(tmp_path, http_server, monkeypatch,
                                                                          roomy_disk):
    url, files, _ = http_server
    files[f"/{proteins.FILE}"] = proteins_fixture(tmp_path / "source").read_bytes()
    monkeypatch.setattr(proteins, "SOURCE_URL", f"{url}/{proteins.FILE}")
    with pytest.raises(SuperGCNError, match="arrived as a matrix of 3,000 rows, not the published 8,745,542"):
        proteins.load_proteins(tmp_path / "raw", seed=0)
    assert sorted(p.name for p in (tmp_path / "raw").iterdir()) == [f"{proteins.FILE}.md5.unexpected",
                                                                   f"{proteins.FILE}.unexpected"]


def test_absent_proteins_where_the_source_is_unreachable_name_where_to_put_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(proteins, "SOURCE_URL", f"http://127.0.0.1:9/{proteins.FILE}")
    with pytest.raises(SuperGCNError, match=f"could not download .* — on a machine with internet fetch it to "
                                            f".*raw/{proteins.FILE}, then run again"):
        proteins.load_proteins(tmp_path / "raw", seed=0)
