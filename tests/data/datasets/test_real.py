"""Loaders of real data, checked against the datasets' published statistics."""

import gzip
from pathlib import Path

import numpy as np
import pytest

from supergcn.data.datasets import prepare_dataset
from supergcn.errors import SuperGCNError


def test_cora_matches_published_statistics(cora):
    assert (cora.num_nodes, cora.num_edges, cora.features.shape[1], cora.num_classes) == (2708, 10556, 1433, 7)
    assert (cora.train_mask.sum(), cora.val_mask.sum(), cora.test_mask.sum()) == (140, 500, 1000)


def test_citeseer_matches_published_statistics(shared_datasets):
    g = prepare_dataset("citeseer", shared_datasets)
    assert (g.num_nodes, g.num_edges, g.features.shape[1], g.num_classes) == (3327, 9104, 3703, 6)
    assert (g.train_mask.sum(), g.val_mask.sum(), g.test_mask.sum()) == (120, 500, 1000)


def test_planetoid_leaves_the_shared_raw_folder_untouched(shared_datasets):
    assert not (shared_datasets / "planetoid" / "Cora" / "processed").exists()


def test_facebook_matches_published_statistics(facebook):
    assert facebook.num_nodes == 22470
    loops = int(np.sum(facebook.indices == np.repeat(np.arange(facebook.num_nodes), facebook.in_degree)))
    assert loops == 179
    assert (facebook.num_edges - loops) // 2 + loops == 171002
    assert np.bincount(facebook.labels).tolist() == [6495, 6880, 5768, 3327]  # company, government, politician, tvshow
    assert facebook.provenance["classes"] == ["company", "government", "politician", "tvshow"]
    assert [int(m.sum()) for m in (facebook.train_mask, facebook.val_mask, facebook.test_mask)] == [13482, 4494, 4494]


def test_missing_facebook_files_name_the_folder(tmp_path):
    with pytest.raises(SuperGCNError, match="facebook_page_page/raw"):
        prepare_dataset("facebook", tmp_path)


def _write_csv_gz(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        for row in rows:
            f.write(",".join(str(v) for v in np.atleast_1d(row)) + "\n")


def _fake_ogbn_arxiv(root: Path, num_nodes=30, seed=0):
    """A tiny dataset in ogbn-arxiv's published raw layout (directed edges)."""
    rng = np.random.default_rng(seed)
    folder = root / "ogb" / "ogbn_arxiv"
    edges = np.stack([rng.integers(0, num_nodes, 60), rng.integers(0, num_nodes, 60)], axis=1)
    _write_csv_gz(folder / "raw" / "edge.csv.gz", edges)
    _write_csv_gz(folder / "raw" / "node-feat.csv.gz", rng.standard_normal((num_nodes, 4)).round(4))
    _write_csv_gz(folder / "raw" / "node-label.csv.gz", rng.integers(0, 40, num_nodes))
    _write_csv_gz(folder / "raw" / "node_year.csv.gz", rng.integers(2000, 2020, num_nodes))
    _write_csv_gz(folder / "raw" / "num-node-list.csv.gz", [num_nodes])
    _write_csv_gz(folder / "raw" / "num-edge-list.csv.gz", [len(edges)])
    order = rng.permutation(num_nodes)
    for name, part in zip(("train", "valid", "test"), np.split(order, [15, 22])):
        _write_csv_gz(folder / "split" / "time" / f"{name}.csv.gz", part)
    (folder / "RELEASE_v1.txt").write_text("fake\n")
    return edges, order


def test_ogb_reads_files_already_present_without_downloading(tmp_path, monkeypatch):
    import ogb.nodeproppred.dataset as ogb_dataset

    def no_download(*args, **kwargs):
        raise AssertionError("ogb tried to download although the files are present")

    monkeypatch.setattr(ogb_dataset, "download_url", no_download)
    edges, order = _fake_ogbn_arxiv(tmp_path)
    for _ in range(2):  # the second load goes through ogb's processed cache
        # 30 nodes, not the published 169,343: a deliberate variant, accepted as such.
        g = prepare_dataset("ogbn-arxiv", tmp_path, accept_source_changes=True)
        expected = {(int(a), int(b)) for a, b in edges} | {(int(b), int(a)) for a, b in edges}
        rows = np.repeat(np.arange(g.num_nodes), g.in_degree)
        assert set(zip(rows.tolist(), g.indices.tolist())) == expected  # made undirected
        assert np.flatnonzero(g.train_mask).tolist() == sorted(order[:15].tolist())


def test_ogb_folder_without_release_file_fails_instead_of_prompting(tmp_path):
    _fake_ogbn_arxiv(tmp_path)
    (tmp_path / "ogb" / "ogbn_arxiv" / "RELEASE_v1.txt").unlink()
    with pytest.raises(SuperGCNError, match="RELEASE_v1.txt"):
        prepare_dataset("ogbn-arxiv", tmp_path)


def test_ogb_failed_download_says_where_to_put_files(tmp_path, monkeypatch):
    import urllib.error

    import ogb.nodeproppred.dataset as ogb_dataset

    def unreachable(*args, **kwargs):
        raise urllib.error.URLError("network is unreachable")

    monkeypatch.setattr(ogb_dataset, "download_url", unreachable)
    with pytest.raises(SuperGCNError, match=r"ogb/ogbn_products"):
        prepare_dataset("ogbn-products", tmp_path)


def test_planetoid_without_files_or_network_fails_clearly(tmp_path, monkeypatch):
    import urllib.error

    from torch_geometric.datasets import Planetoid

    def unreachable(*args, **kwargs):
        raise urllib.error.URLError("network is unreachable")

    monkeypatch.setattr(Planetoid, "download", unreachable)
    with pytest.raises(SuperGCNError, match="planetoid/PubMed/raw"):
        prepare_dataset("pubmed", tmp_path)
