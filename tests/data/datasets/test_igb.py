"""IGB's homogeneous graphs from files in IGB's own layout, written here: ``.npy`` for
the small sizes, headerless raw arrays for ``large`` and ``full``."""

import hashlib
import json
import tarfile

import numpy as np
import pytest
import scipy.sparse as sp

from supergcn.cli import main
from supergcn.data.datasets import igb
from supergcn.data.graph import load_graph
from supergcn.errors import SuperGCNError

from conftest import assert_prepare_refused, run_cli

NODES, EDGES = 2_000, 12_000


def igb_fixture(root, size="tiny", raw=False, seed=0, raw_edges=None):
    """IGB's files for ``size`` under ``root``: features, 19-class labels stored as float,
    directed citations with duplicates, a self loop and both directions of some pairs;
    headerless when ``raw`` (the edges as ``raw_edges`` says, by default as ``raw``)."""
    rng = np.random.default_rng(seed)
    processed = root / size / "processed"
    (processed / "paper").mkdir(parents=True)
    (processed / "paper__cites__paper").mkdir()
    features = rng.standard_normal((NODES, igb.FEATURES), dtype=np.float32)
    labels = rng.integers(0, 19, NODES).astype(np.float32)
    edges = rng.integers(0, NODES, (EDGES, 2), dtype=np.int64)
    edges[:100, 1] = edges[:100, 0][::-1]
    edges[100] = (7, 7)
    edges[101:200] = edges[:99, ::-1]
    raw_edges = raw if raw_edges is None else raw_edges
    for array, path, headerless in ((features, processed / "paper" / "node_feat.npy", raw),
                                    (labels, processed / "paper" / "node_label_19.npy", raw),
                                    (edges, processed / "paper__cites__paper" / "edge_index.npy", raw_edges)):
        if headerless:
            array.tofile(path)
        else:
            np.save(path, array)
    return features, labels, edges


def expected_adjacency(edges):
    """The undirected, de-duplicated adjacency with each self loop once (scipy)."""
    matrix = sp.coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(NODES, NODES)).tocsr()
    matrix = ((matrix + matrix.T) > 0).astype(np.int8).tocsr()
    matrix.sort_indices()
    return matrix


def test_igb_tiny_prepares_end_to_end_as_igb_defines_it(tmp_path):
    features, labels, edges = igb_fixture(tmp_path / "raw" / "igb")
    result = run_cli("prepare", "igb-tiny", "--raw-root", tmp_path / "raw", "--out", tmp_path / "g")
    assert result.returncode == 0, result.stderr
    graph = load_graph(tmp_path / "g")
    expected = expected_adjacency(edges)
    np.testing.assert_array_equal(graph.indptr, expected.indptr)
    np.testing.assert_array_equal(graph.indices, expected.indices)
    np.testing.assert_array_equal(graph.features, features)
    np.testing.assert_array_equal(graph.labels, labels.astype(np.int64))
    # IGB's split: the first 60 % of the nodes train, the next 20 % validation, the rest test.
    assert np.flatnonzero(graph.train_mask).tolist() == list(range(1200))
    assert np.flatnonzero(graph.val_mask).tolist() == list(range(1200, 1600))
    assert np.flatnonzero(graph.test_mask).tolist() == list(range(1600, 2000))
    meta = json.loads((tmp_path / "g" / "meta.json").read_text())
    assert meta["provenance"]["made_undirected"] and meta["num_classes"] == 19
    assert meta["hash"] == "096d08087d6697a68e44c1b0ddeedf8b"


@pytest.mark.parametrize("raw_edges", [False, True])
def test_raw_sizes_are_read_without_a_header(tmp_path, monkeypatch, raw_edges):
    """``large`` and ``full`` ship headerless features and labels whose shapes IGB's
    loader knows, and their edges as ``.npy`` (or headerless, in some copies); in ``full``
    only the first nodes are labelled, and the split covers those alone."""
    features, labels, edges = igb_fixture(tmp_path, "full", raw=True, raw_edges=raw_edges)
    monkeypatch.setitem(igb.RAW_NODES, "full", NODES)
    monkeypatch.setattr(igb, "LABELLED_FULL", 1_500)
    graph = igb.load_igb("igb260m", tmp_path)
    np.testing.assert_array_equal(graph.features, features)
    assert (graph.labels[:1_500] == labels[:1_500]).all() and (graph.labels[1_500:] == -1).all()
    assert graph.train_mask.sum() == 900 and graph.val_mask.sum() == 300 and graph.test_mask.sum() == 300
    assert not (graph.train_mask | graph.val_mask | graph.test_mask)[1_500:].any()
    assert graph.num_edges == expected_adjacency(edges).nnz


@pytest.mark.parametrize("name", ["node_feat.npy", "edge_index.npy"])
def test_a_raw_file_with_part_of_a_row_more_is_refused_not_cut_short(tmp_path, monkeypatch, name):
    """Four bytes more than whole rows (one float32 feature, half an edge) end the raw file:
    it is refused as damaged, not read as its whole rows."""
    igb_fixture(tmp_path, "full", raw=True, raw_edges=True)
    monkeypatch.setitem(igb.RAW_NODES, "full", NODES)
    folder = tmp_path / "full" / "processed" / ("paper" if name == "node_feat.npy" else "paper__cites__paper")
    with open(folder / name, "ab") as handle:
        handle.write(b"\0" * 4)
    with pytest.raises(SuperGCNError, match=f"{name} holds .* bytes, not a whole number of rows"):
        igb.load_igb("igb260m", tmp_path)


@pytest.mark.parametrize("damage, message", [
    (lambda processed: (processed / "paper__cites__paper" / "edge_index.npy").write_bytes(
        (processed / "paper__cites__paper" / "edge_index.npy").read_bytes()[:5_000]), "raw files of igb-tiny"),
    (lambda processed: np.save(processed / "paper" / "node_label_19.npy", np.zeros(NODES - 1, np.float32)),
     "holds 1,999 labels for 2,000 nodes"),
    (lambda processed: (processed / "paper" / "node_feat.npy").unlink(), "IGB tiny files not found"),
])
def test_a_damaged_igb_file_is_one_line(tmp_path, damage, message):
    igb_fixture(tmp_path / "raw" / "igb")
    damage(tmp_path / "raw" / "igb" / "tiny" / "processed")
    assert_prepare_refused("igb-tiny", tmp_path / "raw", tmp_path / "g", message)


def test_igb_fetches_unpacks_and_prepares_its_archive(tmp_path, http_server, monkeypatch):
    """An IGB size whose files are absent is downloaded, checked, unpacked and read."""
    url, files, _ = http_server
    igb_fixture(tmp_path / "source")
    archive = tmp_path / "igb_homogeneous_tiny.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "source" / "tiny", arcname="tiny")
    files["/igb_homogeneous_tiny.tar.gz"] = archive.read_bytes()
    monkeypatch.setitem(igb.ARCHIVES, "tiny", (f"{url}/igb_homogeneous_tiny.tar.gz",
                                               hashlib.md5(archive.read_bytes()).hexdigest(), 2_000))
    root = tmp_path / "raw" / "igb"
    graph = igb.load_igb("igb-tiny", root)
    assert graph.num_nodes == 2_000 and sorted(p.name for p in root.iterdir()) == ["tiny"]


def _serve_igb_files(tmp_path, http_server, monkeypatch, size):
    """IGB's files of ``size`` as IGB serves them (headerless features and labels, ``.npy``
    edges), on the local server in place of IGB's bucket; returns the server's files."""
    url, files, ranges = http_server
    igb_fixture(tmp_path / "source", size, raw=True, raw_edges=False)
    for path in igb.FILE_RECORDS[size]:
        files[f"/{size}/{path}"] = (tmp_path / "source" / size / "processed" / path).read_bytes()
    monkeypatch.setitem(igb.FILE_ROOTS, size, f"{url}/{size}")
    monkeypatch.setitem(igb.RAW_NODES, size, NODES)
    monkeypatch.setattr(igb, "LABELLED_FULL", 1_500)
    return files, ranges


def test_igb260m_fetches_its_files_checked_against_the_recorded_checksums(tmp_path, http_server, monkeypatch,
                                                                          capsys):
    files, ranges = _serve_igb_files(tmp_path, http_server, monkeypatch, "full")
    monkeypatch.setitem(igb.FILE_RECORDS, "full", {path: (hashlib.md5(files[f"/full/{path}"]).hexdigest(), None)
                                                   for path in igb.FILE_RECORDS["full"]})
    good = files["/full/paper__cites__paper/edge_index.npy"]
    files["/full/paper__cites__paper/edge_index.npy"] = good[:-8] + bytes(8)  # the last citation changed
    root = tmp_path / "raw" / "igb"
    # In this process, where the server's address is patched in: the command's one-line error.
    assert main(["prepare", "igb260m", "--raw-root", tmp_path / "raw", "--out", tmp_path / "g"]) == 2
    stderr = capsys.readouterr().err
    assert stderr.count("error:") == 1 and "edge_index.npy arrived with another checksum than recorded" in stderr
    assert not (tmp_path / "g").exists() and not list(root.rglob("edge_index.npy*"))
    files["/full/paper__cites__paper/edge_index.npy"] = good
    graph = igb.load_igb("igb260m", root)
    np.testing.assert_array_equal(graph.features, np.fromfile(root / "full/processed/paper/node_feat.npy",
                                                              np.float32).reshape(NODES, igb.FEATURES))
    assert graph.train_mask.sum() == 900
    # The two files that arrived whole the first time were not fetched again.
    assert len(ranges) == 4
    fetched = sorted(str(p.relative_to(root / "full" / "processed")) for p in root.rglob("*") if p.is_file())
    assert fetched == sorted([*igb.FILE_RECORDS["full"], *(f"{path}.md5" for path in igb.FILE_RECORDS["full"])])


def test_igb_large_files_of_another_size_than_recorded_are_refused(tmp_path, http_server, monkeypatch):
    files, _ = _serve_igb_files(tmp_path, http_server, monkeypatch, "large")
    monkeypatch.setitem(igb.FILE_RECORDS, "large", {"paper/node_feat.npy": (None, NODES * igb.FEATURES * 4),
                                                    "paper/node_label_19.npy": (None, NODES * 4),
                                                    "paper__cites__paper/edge_index.npy": (None, None)})
    files["/large/paper/node_label_19.npy"] += bytes(4)
    with pytest.raises(SuperGCNError, match=f"node_label_19.npy arrived with {NODES * 4 + 4:,} bytes, not the "
                                            f"{NODES * 4:,} recorded"):
        igb.load_igb("igb-large", tmp_path / "raw" / "igb")


def test_a_nan_in_one_raw_feature_is_refused_before_anything_is_written(tmp_path):
    """IGB's features, one value of them NaN: one line naming how many and where, exit 2,
    no graph directory; kept on request, and counted in the manifest."""
    features, _, _ = igb_fixture(tmp_path / "raw" / "igb")
    features[1_234, 56] = np.nan
    np.save(tmp_path / "raw" / "igb" / "tiny" / "processed" / "paper" / "node_feat.npy", features)
    assert_prepare_refused("igb-tiny", tmp_path / "raw", tmp_path / "g",
                           "has 1 NaN or infinite feature value (the first at node 1,234, feature 56)")
    result = run_cli("prepare", "igb-tiny", "--raw-root", tmp_path / "raw", "--out", tmp_path / "g",
                     "--allow-nonfinite-features")
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "g" / "meta.json").read_text())["nonfinite_features"] == 1
