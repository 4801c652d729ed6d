"""ogb-lsc-mag240M's paper-citation graph from files in OGB-LSC's layout, written here."""

import hashlib
import json
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from supergcn.data.datasets import mag240m
from supergcn.data.datasets.mag240m import FEATURES, FOLDER, load_mag240m
from supergcn.data.graph import load_graph
from supergcn.errors import SuperGCNError

from conftest import assert_prepare_refused, run_cli

NODES, EDGES, CLASSES = 3_000, 15_000, 153


def mag240m_fixture(root, seed=0):
    """meta.pt, split_dict.pt (numpy arrays, as OGB-LSC saves them), float16 features,
    float labels with NaN for the hidden and the unlabelled, 2 x E citations."""
    rng = np.random.default_rng(seed)
    folder = root / FOLDER
    (folder / "processed" / "paper").mkdir(parents=True)
    (folder / "processed" / "paper___cites___paper").mkdir()
    torch.save({"paper": NODES, "author": 10, "institution": 2, "num_classes": CLASSES}, folder / "meta.pt")
    order = rng.permutation(NODES)
    split = {"train": np.sort(order[:1_000]), "valid": np.sort(order[1_000:1_300]), "test": np.sort(order[1_300:1_500])}
    torch.save(split, folder / "split_dict.pt")
    features = rng.standard_normal((NODES, FEATURES)).astype(np.float16)
    labels = np.full(NODES, np.nan)
    labels[order[:1_300]] = rng.integers(0, CLASSES, 1_300)
    edges = rng.integers(0, NODES, (2, EDGES), dtype=np.int64)
    np.save(folder / "processed" / "paper" / "node_feat.npy", features)
    np.save(folder / "processed" / "paper" / "node_label.npy", labels)
    np.save(folder / "processed" / "paper___cites___paper" / "edge_index.npy", edges)
    return split, features, labels, edges


def test_mag240m_prepares_end_to_end(tmp_path):
    split, features, labels, edges = mag240m_fixture(tmp_path / "raw" / "ogb_lsc")
    result = run_cli("prepare", "ogb-lsc-mag240M", "--raw-root", tmp_path / "raw", "--out", tmp_path / "g")
    assert result.returncode == 0, result.stderr
    graph = load_graph(tmp_path / "g")
    matrix = sp.coo_matrix((np.ones(EDGES), (edges[0], edges[1])), shape=(NODES, NODES)).tocsr()
    matrix = ((matrix + matrix.T) > 0).tocsr()
    matrix.sort_indices()
    np.testing.assert_array_equal(graph.indptr, matrix.indptr)
    np.testing.assert_array_equal(graph.indices, matrix.indices)
    np.testing.assert_array_equal(graph.features, features.astype(np.float32))
    assert np.flatnonzero(graph.train_mask).tolist() == split["train"].tolist()
    assert np.flatnonzero(graph.val_mask).tolist() == split["valid"].tolist()
    assert not graph.test_mask.any()  # the test labels are hidden
    labelled = np.concatenate([split["train"], split["valid"]])
    np.testing.assert_array_equal(graph.labels[labelled], labels[labelled].astype(np.int64))
    assert (np.delete(graph.labels, labelled) == -1).all()
    meta = json.loads((tmp_path / "g" / "meta.json").read_text())
    assert meta["provenance"]["made_undirected"] and "float32" in meta["provenance"]["features"]
    assert meta["hash"] == "ce830e0cce93fea49f336a7bc278ce97"
    # The widened features are written once, beside the original, and reused.
    widened = tmp_path / "raw" / "ogb_lsc" / FOLDER / "processed" / "paper" / "node_feat.float32.npy"
    stamp = widened.stat().st_mtime_ns
    assert load_mag240m(tmp_path / "raw" / "ogb_lsc").num_nodes == NODES
    assert widened.stat().st_mtime_ns == stamp


def test_a_split_file_that_would_run_code_is_refused(tmp_path):
    mag240m_fixture(tmp_path / "raw" / "ogb_lsc")

    class Exploit:
        def __reduce__(self):
            return print, ("ran",)
    torch.save({"train": Exploit()}, tmp_path / "raw" / "ogb_lsc" / FOLDER / "split_dict.pt")
    result = run_cli("prepare", "ogb-lsc-mag240M", "--raw-root", tmp_path / "raw", "--out", tmp_path / "g")
    assert result.returncode == 2 and "ran" not in result.stdout, result.stdout + result.stderr
    assert result.stderr.count("error:") == 1 and "raw files of ogb-lsc-mag240M" in result.stderr


@pytest.mark.parametrize("damage, message", [
    (lambda folder: np.save(folder / "processed" / "paper" / "node_label.npy", np.zeros(NODES - 1)),
     "holds 2,999 labels for 3,000 papers"),
    (lambda folder: (folder / "processed" / "paper___cites___paper" / "edge_index.npy").write_bytes(b"\x93NUMPY"),
     "raw files of ogb-lsc-mag240M"),
    (lambda folder: np.save(folder / "processed" / "paper" / "node_label.npy", np.full(NODES, np.nan)),
     "gives training or validation papers no class"),
    (lambda folder: (folder / "meta.pt").unlink(), "ogb-lsc-mag240M files not found"),
])
def test_a_damaged_mag240m_file_is_one_line(tmp_path, damage, message):
    mag240m_fixture(tmp_path / "raw" / "ogb_lsc")
    damage(tmp_path / "raw" / "ogb_lsc" / FOLDER)
    assert_prepare_refused("ogb-lsc-mag240M", tmp_path / "raw", tmp_path / "g", message)


def test_mag240m_is_fetched_checked_and_unpacked_where_absent(tmp_path, http_server, monkeypatch):
    url, files, _ = http_server
    mag240m_fixture(tmp_path / "source")
    archive = tmp_path / "mag240m_kddcup2021.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        for path in (tmp_path / "source").rglob("*"):
            if path.is_file():
                bundle.write(path, path.relative_to(tmp_path / "source"))
    files["/mag240m_kddcup2021.zip"] = archive.read_bytes()
    monkeypatch.setattr(mag240m, "ARCHIVE_URL", f"{url}/mag240m_kddcup2021.zip")
    monkeypatch.setattr(mag240m, "UNPACKED_BYTES", 10**8)
    monkeypatch.setattr(mag240m, "PAPERS", NODES)
    monkeypatch.setattr(mag240m, "ARCHIVE_MD5", "0" * 32)
    root = tmp_path / "raw" / "ogb_lsc"
    with pytest.raises(SuperGCNError, match="arrived with another checksum than recorded"):
        load_mag240m(root)
    assert list(root.iterdir()) == []
    monkeypatch.setattr(mag240m, "ARCHIVE_MD5", hashlib.md5(archive.read_bytes()).hexdigest())
    graph = load_mag240m(root)
    assert graph.num_nodes == NODES and [p.name for p in root.iterdir()] == [FOLDER]
    np.testing.assert_array_equal(graph.indices, load_mag240m(tmp_path / "source").indices)
