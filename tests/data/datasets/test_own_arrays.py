"""A graph of your own from NumPy files: read against hand-worked graphs and networkx, and
every bad file refused through the command line as docs/own-graph.md says."""

from __future__ import annotations

import hashlib
import json
import mmap
import re

import networkx as nx
import numpy as np
import pytest

from supergcn.data.datasets import prepare_own_dataset
from supergcn.data.own_files import GraphFiles
from supergcn.errors import SuperGCNError

from conftest import REPO, run_cli

#: Five nodes; edges with a duplicate, both directions of 0-1, a self loop, node 4 isolated.
EDGES = np.array([[0, 1, 1, 3, 2, 0], [1, 0, 2, 3, 1, 1]])
#: Their undirected CSR, by hand: 0: {1}, 1: {0, 2}, 2: {1}, 3: {3}, 4: {}.
INDPTR, INDICES = [0, 1, 3, 4, 5, 5], [1, 0, 2, 1, 3]
FEATURES = np.arange(10, dtype=np.float64).reshape(5, 2)
LABELS = np.array([0, 1, 0, 1, -1])


def write(folder, **arrays) -> dict[str, str]:
    """Each array saved as ``folder/<role>.npy``; the paths by role."""
    paths = {}
    for role, array in arrays.items():
        paths[role] = str(folder / f"{role}.npy")
        np.save(paths[role], array)
    return paths


def own(name="mine", seed=0, **files):
    return prepare_own_dataset(name, GraphFiles(**files), seed=seed)


def split_npz(path, **arrays) -> str:
    np.savez(path, **arrays)
    return str(path)


@pytest.mark.parametrize("layout", ["2 x E", "E x 2"])
def test_a_hand_worked_graph_in_either_layout(tmp_path, layout):
    edges = EDGES if layout == "2 x E" else EDGES.T.copy()
    files = write(tmp_path, edges=edges, features=FEATURES, labels=LABELS)
    files["split"] = split_npz(tmp_path / "split.npz", train=np.array([0]), val=np.array([1]), test=np.array([2, 3]))
    graph = own(**files)
    assert graph.indptr.tolist() == INDPTR and graph.indices.tolist() == INDICES
    assert graph.features.dtype == np.float32 and np.array_equal(graph.features, FEATURES.astype(np.float32))
    assert graph.labels.tolist() == LABELS.tolist() and graph.num_classes == 2
    assert [mask.tolist() for mask in (graph.train_mask, graph.val_mask, graph.test_mask)] == [
        [True, False, False, False, False], [False, True, False, False, False], [False, False, True, True, False]]
    assert graph.provenance["edge_layout"] == layout and graph.provenance["edges_in_file"] == 6


def test_a_two_by_two_edge_index_is_read_as_two_by_e(tmp_path):
    """Rows [0, 1] and [2, 3] are the edges 0-2 and 1-3 (as E x 2 they would be 0-1, 2-3)."""
    files = write(tmp_path, edges=np.array([[0, 1], [2, 3]]), features=np.ones((4, 1)), labels=np.array([0, 1, 0, 1]))
    graph = own(**files)
    assert graph.indptr.tolist() == [0, 1, 2, 3, 4] and graph.indices.tolist() == [2, 3, 0, 1]


def test_boolean_masks_and_node_ids_give_the_same_split(tmp_path):
    files = write(tmp_path, edges=EDGES, features=FEATURES, labels=LABELS)
    ids = split_npz(tmp_path / "ids.npz", train=np.array([3, 0]), val=np.array([1]), test=np.array([2]))
    masks = split_npz(tmp_path / "masks.npz", train=np.array([1, 0, 0, 1, 0], bool),
                      val=np.array([0, 1, 0, 0, 0], bool), test=np.array([0, 0, 1, 0, 0], bool))
    by_ids, by_masks = own(**files, split=ids), own(**files, split=masks)
    for mask in ("train_mask", "val_mask", "test_mask"):
        assert np.array_equal(getattr(by_ids, mask), getattr(by_masks, mask)), mask
    assert by_ids.train_mask.tolist() == [True, False, False, True, False]


def test_one_archive_holds_every_array_and_a_lone_array_is_read_whatever_its_name(tmp_path):
    np.savez(tmp_path / "graph.npz", edges=EDGES, features=FEATURES, labels=LABELS, train=np.array([0]),
             val=np.array([1]), test=np.array([2]))
    np.savez(tmp_path / "lone.npz", whatever=EDGES.T)
    whole = str(tmp_path / "graph.npz")
    graph = own(edges=whole, features=whole, labels=whole, split=whole)
    assert graph.indptr.tolist() == INDPTR and graph.indices.tolist() == INDICES
    assert graph.test_mask.tolist() == [False, False, True, False, False]
    lone = own(edges=str(tmp_path / "lone.npz"), features=whole, labels=whole, split=whole)
    assert lone.content_hash() == graph.content_hash()


def test_without_a_split_the_labelled_nodes_are_split_at_random_from_the_seed(tmp_path):
    n = 1000
    labels = np.arange(n) % 4
    labels[::10] = -1  # 100 unlabelled nodes, in no split
    files = write(tmp_path, edges=np.array([[0], [1]]), features=np.zeros((n, 1)), labels=labels)
    first, again, other = own(seed=3, **files), own(seed=3, **files), own(seed=4, **files)
    masks = [first.train_mask, first.val_mask, first.test_mask]
    assert [int(mask.sum()) for mask in masks] == [540, 180, 180]  # 60/20/20 of the 900 labelled
    assert not np.any(masks[0] & masks[1]) and not np.any(masks[0] & masks[2]) and not np.any(masks[1] & masks[2])
    assert not np.any((masks[0] | masks[1] | masks[2]) & (labels < 0))
    assert np.array_equal(first.train_mask, again.train_mask) and not np.array_equal(first.train_mask, other.train_mask)
    assert first.provenance["seed"] == 3


def test_narrow_id_dtypes_are_widened_before_the_edge_keys_overflow(tmp_path):
    """int16 ids on 300 nodes: the key min * 300 + max passes int16's 32,767; the CSR is
    networkx's, labels of int8 read as they are."""
    rng = np.random.default_rng(0)
    edges = rng.integers(0, 300, (2, 2000)).astype(np.int16)
    files = write(tmp_path, edges=edges, features=np.ones((300, 3), np.float32),
                  labels=(np.arange(300) % 3).astype(np.int8))
    graph = own(**files)
    reference = nx.Graph()
    reference.add_nodes_from(range(300))
    reference.add_edges_from(edges.T.tolist())
    for node in range(300):
        assert graph.indices[graph.indptr[node]:graph.indptr[node + 1]].tolist() == sorted(reference[node]), node
    assert graph.labels.dtype == np.int64 and graph.num_classes == 3


@pytest.mark.parametrize("bad", [2**32 + 1, 2**63 - 1, -(2**32) + 1])
def test_a_wide_id_is_refused_not_wrapped_into_the_graph(tmp_path, bad):
    """2**32 + 1 is node 1 once cast to int32, and -(2**32) + 1 too: both lie outside the 5 nodes."""
    edges = EDGES.astype(np.int64)
    edges[1, 4] = bad
    files = write(tmp_path, edges=edges, features=FEATURES, labels=LABELS)
    with pytest.raises(SuperGCNError, match=rf"names node {bad} \(edge 4\), outside the 5 nodes"):
        own(**files)


def test_unsigned_ids_and_labels_of_one_column_are_read(tmp_path):
    files = write(tmp_path, edges=EDGES.astype(np.uint64), features=FEATURES.astype(np.int32),
                  labels=LABELS.reshape(5, 1))
    graph = own(**files)
    assert graph.indices.tolist() == INDICES and graph.labels.tolist() == LABELS.tolist()
    assert np.array_equal(graph.features, FEATURES.astype(np.float32))


def test_float32_features_of_a_npy_are_mapped_not_copied(tmp_path):
    files = write(tmp_path, edges=EDGES, features=FEATURES.astype(np.float32), labels=LABELS)
    base = own(**files).features
    while base is not None and not isinstance(base, mmap.mmap):
        base = getattr(base, "base", None)
    assert isinstance(base, mmap.mmap)


def test_the_provenance_names_each_file_with_its_size_and_digest(tmp_path):
    files = write(tmp_path, edges=EDGES, features=FEATURES, labels=LABELS)
    recorded = own(**files).provenance["files"]
    assert sorted(recorded) == ["edges", "features", "labels"]
    for role, path in files.items():
        data = open(path, "rb").read()
        assert recorded[role] == {"path": str(tmp_path / f"{role}.npy"), "bytes": len(data),
                                  "blake2b": hashlib.blake2b(data, digest_size=16).hexdigest()}


def test_the_hash_covers_the_graph_not_its_name_files_or_edge_order(tmp_path):
    """docs/own-graph.md, "What the manifest records"."""
    files = write(tmp_path, edges=EDGES, features=FEATURES, labels=LABELS)
    graph = own(name="mine", **files)
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    shuffled = np.concatenate([EDGES[::-1], EDGES], axis=1)[:, ::-1]  # reversed, reordered, twice
    other = own(name="theirs", **write(moved, edges=shuffled, features=FEATURES, labels=LABELS))
    assert other.content_hash() == graph.content_hash()
    relabelled = LABELS.copy()
    relabelled[2] = 1
    changed = own(**write(moved, edges=EDGES, features=FEATURES, labels=relabelled))
    assert changed.content_hash() != graph.content_hash()


# --- Every bad file through the command line, in the order of docs/own-graph.md's table ---

N = 10_000


@pytest.fixture
def good(tmp_path):
    """A good graph of N nodes in ``tmp_path/in``: its files by role."""
    rng = np.random.default_rng(0)
    folder = tmp_path / "in"
    folder.mkdir()
    files = write(folder, edges=rng.integers(0, N, (2, 30_000)), features=rng.standard_normal((N, 8)),
                  labels=np.arange(N) % 5)
    files["split"] = split_npz(folder / "split.npz", train=np.arange(0, 6000), val=np.arange(6000, 8000),
                               test=np.arange(8000, N))
    return files


def replaced(files, role, value):
    """``files`` with the ``role`` file replaced by ``value``: an array (saved as .npy), or
    a mapping (saved as .npz), or text."""
    path = files[role].rsplit("/", 1)[0] + f"/bad-{role}"
    if isinstance(value, dict):
        np.savez(path + ".npz", **value)
        path += ".npz"
    elif isinstance(value, str):
        path += ".npy"
        open(path, "w").write(value)
    else:
        path += ".npy"
        np.save(path, value)
    return {**files, role: path}


def edges_with(files, row, column, value):
    edges = np.load(files["edges"])
    edges[row, column] = value
    return replaced(files, "edges", edges)


def array_of(files, role):
    return np.load(files[role])


def split_with(files, **changes):
    return replaced(files, "split", {**dict(np.load(files["split"])), **changes})


def unlabelled_in_train(files):
    labels = array_of(files, "labels")
    labels[17] = -1
    return replaced(files, "labels", labels)


def nan_features(files):
    features = array_of(files, "features")
    features[5, 3] = np.nan
    return replaced(files, "features", features)


def negative_label(files):
    labels = array_of(files, "labels")
    labels[3] = -4
    return replaced(files, "labels", labels)


#: (case, the files of the case, extra words of the command), in the page's table order.
BAD_FILES = [
    ("missing file", lambda f: {**f, "edges": f["edges"] + ".gone"}, ()),
    ("unreadable", lambda f: replaced(f, "edges", "source,target\n0,1\n"), ()),
    ("archive without the role", lambda f: replaced(f, "labels", {"y": np.zeros(N), "z": np.zeros(N)}), ()),
    ("edges 3 x E", lambda f: replaced(f, "edges", np.zeros((3, 7), np.int64)), ()),
    ("float node ids", lambda f: replaced(f, "edges", array_of(f, "edges").astype(float)), ()),
    ("node id past N", lambda f: edges_with(f, 1, 17, N), ()),
    ("features 1-D", lambda f: replaced(f, "features", np.zeros(N)), ()),
    ("NaN feature", nan_features, ()),
    ("labels too few", lambda f: replaced(f, "labels", array_of(f, "labels")[:-1]), ()),
    ("float labels", lambda f: replaced(f, "labels", array_of(f, "labels").astype(float)), ()),
    ("label below -1", negative_label, ()),
    ("labels past the classes", lambda f: replaced(f, "labels", array_of(f, "labels") + 1), ()),
    ("split without val", lambda f: replaced(f, "split", {"train": np.arange(3), "test": np.arange(3, 6)}), ()),
    ("overlapping split", lambda f: split_with(f, val=np.arange(5999, 8000)), ()),
    ("unlabelled in the split", unlabelled_in_train, ()),
    ("split id past N", lambda f: split_with(f, test=np.arange(8000, N + 1)), ()),
    ("a built-in name", lambda f: f, ("--name", "cora")),
]


def page_errors() -> list[str]:
    """The second column of the page's table of checks, each a regex (``…``: anything)."""
    page = (REPO / "docs" / "own-graph.md").read_text()
    table = page.split("## What prepare checks")[1].split("\n\n")[2]
    return [".*?".join(map(re.escape, re.search(r"\| `([^`]*)` \|$", row).group(1).split("…")))
            for row in table.splitlines()[2:]]


def prepare(files, out, *extra):
    words = ["--name", "my-graph", *(word for role, path in files.items() for word in (f"--{role}", path))]
    return run_cli("prepare", *words, *extra, "--out", out)


@pytest.mark.parametrize("index", range(len(BAD_FILES)), ids=[case for case, _, _ in BAD_FILES])
def test_a_bad_file_gets_the_pages_one_line_error_and_leaves_nothing(good, tmp_path, index):
    _, make, extra = BAD_FILES[index]
    assert len(page_errors()) == len(BAD_FILES)
    out = tmp_path / "out" / "graph"
    result = prepare(make(good), out, *extra)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    (line,) = result.stderr.splitlines()
    assert re.match(r"supergcn prepare: error: " + page_errors()[index], line), line
    assert " — " in line
    assert not out.exists() and not list(tmp_path.glob("out/.graph.tmp-*"))


def test_the_good_graph_passes_and_nonfinite_features_can_be_kept(good, tmp_path):
    assert prepare(good, tmp_path / "g").returncode == 0
    result = prepare(nan_features(good), tmp_path / "nan", "--allow-nonfinite-features")
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "nan" / "meta.json").read_text())["nonfinite_features"] == 1


def test_a_negative_node_id_is_refused_too(good, tmp_path):
    result = prepare(edges_with(good, 0, 5, -1), tmp_path / "g")
    assert result.returncode == 2 and "names node -1 (edge 5), outside the 10,000 nodes" in result.stderr


@pytest.mark.parametrize("words, message", [
    (("synthetic-tiny", "--name", "x"), "'synthetic-tiny' names a built-in dataset and --name your own graph"),
    (("--edges", "e.npy"), "--edges without --name: nothing to prepare"),
    ((), "no dataset: nothing to prepare"),
    (("--name", "x", "--edges", "e.npy"), "your own graph 'x' needs --features and --labels too"),
    (("--name", "a/b", "--edges", "e", "--features", "f", "--labels", "l"), "--name 'a/b' is not a dataset name"),
    (("--name", "x", "--edges", "e", "--features", "f", "--labels", "l", "--raw-root", "raw"),
     "--raw-root is for a built-in dataset's original files, not your own graph's"),
])
def test_the_two_forms_are_exclusive_and_the_own_one_complete(tmp_path, words, message):
    result = run_cli("prepare", *words, "--out", tmp_path / "g")
    assert result.returncode == 2 and result.stderr.count("error:") == 1 and message in result.stderr, result.stderr
    assert not (tmp_path / "g").exists()
