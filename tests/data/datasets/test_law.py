"""UK-2007-05 from the LAW's BV files (written here in that format), with the features and
labels the paper makes up for it."""

import hashlib
import json
import subprocess

import numpy as np
import pytest
import scipy.sparse as sp

from supergcn.data.datasets import law, webgraph
from supergcn.data.graph import load_graph
from supergcn.errors import SuperGCNError
from supergcn.testing.bvgraph import encode_bvgraph

from conftest import run_cli

NODES = 1_500


def uk_fixture(root):
    """A web-graph-like BV graph of 1,500 pages (>= 10,000 links): hosts of consecutive
    pages linking within, copied navigation lists, and a few far links."""
    rng = np.random.default_rng(3)
    lists = []
    for x in range(NODES):
        host = x - x % 50
        links = set(range(host, host + int(rng.integers(4, 12))))
        links |= set(rng.integers(host, host + 50, 6).tolist())
        links |= set(rng.integers(0, NODES, 2).tolist())
        lists.append(sorted(v for v in links if v < NODES))
    (root / law.BASENAME).mkdir(parents=True)
    encode_bvgraph(root / law.BASENAME / law.BASENAME, lists)
    return lists


def test_uk_2007_05_prepares_end_to_end(tmp_path):
    lists = uk_fixture(tmp_path / "raw" / "law")
    assert sum(map(len, lists)) >= 10_000
    result = run_cli("prepare", "uk-2007-05", "--raw-root", tmp_path / "raw", "--seed", 4, "--out", tmp_path / "g")
    assert result.returncode == 0, result.stderr
    graph = load_graph(tmp_path / "g")
    rows = np.repeat(np.arange(NODES), [len(successors) for successors in lists])
    matrix = sp.coo_matrix((np.ones(len(rows)), (rows, np.concatenate(lists))), shape=(NODES, NODES)).tocsr()
    matrix = ((matrix + matrix.T) > 0).tocsr()
    matrix.sort_indices()
    np.testing.assert_array_equal(graph.indptr, matrix.indptr)
    np.testing.assert_array_equal(graph.indices, matrix.indices)
    assert graph.features.shape == (NODES, law.FEATURES) and abs(float(graph.features.std()) - 1) < 0.02
    assert graph.labels.min() >= 0 and graph.labels.max() < law.CLASSES
    assert (graph.train_mask.sum(), graph.val_mask.sum(), graph.test_mask.sum()) == (900, 300, 300)
    meta = json.loads((tmp_path / "g" / "meta.json").read_text())
    assert meta["provenance"]["seed"] == 4 and "made_up" in meta["provenance"]
    assert meta["hash"] == "a470e5c8eb21bba4d0dc6da6fd40b89f"


def test_a_truncated_uk_graph_is_one_line(tmp_path):
    uk_fixture(tmp_path / "raw" / "law")
    graph_file = tmp_path / "raw" / "law" / law.BASENAME / f"{law.BASENAME}.graph"
    graph_file.write_bytes(graph_file.read_bytes()[:-200])
    result = run_cli("prepare", "uk-2007-05", "--raw-root", tmp_path / "raw", "--out", tmp_path / "g")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.count("error:") == 1 and "uk-2007-05.graph" in result.stderr, result.stderr
    assert not (tmp_path / "g").exists()


def _serve_uk(tmp_path, http_server, monkeypatch, listed=None):
    """The fixture's files on the local server as the LAW serves them, with an md5sums
    listing (``listed`` overrides its entries)."""
    url, files, ranges = http_server
    uk_fixture(tmp_path / "source")
    sums = []
    for suffix in (".graph", ".properties", ".offsets"):
        name = f"{law.BASENAME}{suffix}"
        body = (tmp_path / "source" / law.BASENAME / name).read_bytes() if suffix != ".offsets" else b"offsets"
        files[f"/{name}"] = body
        sums.append(f"{(listed or {}).get(name, hashlib.md5(body).hexdigest())}  {name}")
    files[f"/{law.BASENAME}.md5sums"] = ("\n".join(sums) + "\n").encode()
    monkeypatch.setattr(law, "SOURCE_URL", url)
    return files, ranges


def test_uk_2007_05_fetches_the_laws_files_checked_against_its_md5sums(tmp_path, http_server, monkeypatch):
    _, ranges = _serve_uk(tmp_path, http_server, monkeypatch)
    properties = webgraph.read_properties(tmp_path / "source" / law.BASENAME / f"{law.BASENAME}.properties")
    monkeypatch.setattr(law, "NODES", int(properties["nodes"]))
    monkeypatch.setattr(law, "ARCS", int(properties["arcs"]))
    graph = law.load_uk_2007_05(tmp_path / "raw", seed=0)
    local = law.load_uk_2007_05(tmp_path / "source", seed=0)
    np.testing.assert_array_equal(graph.indices, local.indices)
    assert len(ranges) == 3  # md5sums, properties, graph; the offsets are not needed
    folder = tmp_path / "raw" / law.BASENAME
    assert subprocess.run(["md5sum", "-c", "--ignore-missing", f"{law.BASENAME}.md5sums"], cwd=folder).returncode == 0


def test_a_uk_download_the_listing_does_not_vouch_for_is_refused(tmp_path, http_server, monkeypatch, roomy_disk):
    _serve_uk(tmp_path, http_server, monkeypatch, listed={f"{law.BASENAME}.graph": "0" * 32})
    with pytest.raises(SuperGCNError, match="uk-2007-05.graph arrived with another checksum than recorded"):
        law.load_uk_2007_05(tmp_path / "raw", seed=0)
    assert not (tmp_path / "raw" / law.BASENAME / f"{law.BASENAME}.graph").exists()


def test_a_uk_download_of_another_graph_than_published_is_set_aside(tmp_path, http_server, monkeypatch, roomy_disk):
    _, ranges = _serve_uk(tmp_path, http_server, monkeypatch)
    for _ in range(2):  # the files set aside are neither prepared nor taken for the graph the next time
        with pytest.raises(SuperGCNError, match=r"gives 1,500 nodes and [\d,]+ arcs, not the published 105,896,555 "
                                                r"and 3,738,733,648 \(the files are kept with the suffix .unexpected"):
            law.load_uk_2007_05(tmp_path / "raw", seed=0)
    folder = tmp_path / "raw" / law.BASENAME
    assert sorted(p.name for p in folder.iterdir() if not p.name.endswith(".unexpected")) == [
        f"{law.BASENAME}.md5sums", f"{law.BASENAME}.md5sums.md5"]
    assert len(ranges) == 5  # md5sums once, then properties and graph twice


def test_absent_uk_files_where_the_laws_server_is_unreachable_name_all_three(tmp_path, monkeypatch):
    monkeypatch.setattr(law, "SOURCE_URL", "http://127.0.0.1:9/uk-2007-05")
    with pytest.raises(SuperGCNError, match=r"fetch uk-2007-05.md5sums, uk-2007-05.properties, uk-2007-05.graph "
                                            r"from http://127.0.0.1:9/uk-2007-05/ into .*raw/uk-2007-05"):
        law.load_uk_2007_05(tmp_path / "raw", seed=0)
    assert not (tmp_path / "raw").exists()


def test_a_source_without_the_listing_names_all_three_files_too(tmp_path, http_server, monkeypatch):
    url, files, _ = http_server
    monkeypatch.setattr(law, "SOURCE_URL", url)  # serves nothing: 404
    with pytest.raises(SuperGCNError, match=r"\(HTTP 404\).* fetch uk-2007-05.md5sums, uk-2007-05.properties, "
                                            r"uk-2007-05.graph from"):
        law.load_uk_2007_05(tmp_path / "raw", seed=0)
