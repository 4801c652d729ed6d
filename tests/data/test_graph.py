import dataclasses
import json

import numpy as np
import pytest
import scipy.sparse as sp

from supergcn.data.graph import build_graph, load_graph, random_split, save_graph, with_self_loop_policy
from supergcn.errors import SuperGCNError

from conftest import awkward_edge_list, run_cli


def test_save_and_load_round_trip_with_stable_hash(tmp_path, awkward_graph):
    meta = save_graph(awkward_graph, tmp_path / "g")
    loaded = load_graph(tmp_path / "g", mmap=True)
    for name in ("indptr", "indices", "features", "labels", "train_mask", "val_mask", "test_mask"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(awkward_graph, name))
    assert loaded.content_hash() == meta["hash"]
    src, dst = awkward_edge_list(300)
    undirected = {(min(a, b), max(a, b)) for a, b in zip(src.tolist(), dst.tolist())}
    loops = sum(a == b for a, b in undirected)
    assert loops >= 2 and meta["self_loops"] == loops
    assert meta["num_edges_undirected"] == len(undirected)
    assert meta["isolated_nodes"] == 20
    assert sorted(p.name for p in (tmp_path).iterdir()) == ["g"], "temporary directories left behind"


def test_hash_changes_with_any_array(awkward_graph):
    before = awkward_graph.content_hash()
    awkward_graph.features[0, 0] += 1
    assert awkward_graph.content_hash() != before


def test_failed_save_leaves_previous_output_intact(tmp_path, awkward_graph):
    save_graph(awkward_graph, tmp_path / "g")
    broken = awkward_graph
    broken.labels = broken.labels[:-1]
    with pytest.raises(SuperGCNError, match="labels"):
        save_graph(broken, tmp_path / "g")
    assert load_graph(tmp_path / "g").num_nodes == 300
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g"]


def test_random_split_is_seeded_disjoint_and_sized():
    a = random_split(1000, (0.6, 0.2, 0.2), seed=3)
    b = random_split(1000, (0.6, 0.2, 0.2), seed=3)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert [int(m.sum()) for m in a] == [600, 200, 200]
    assert not np.any(a[0] & a[1]) and not np.any(a[0] & a[2]) and not np.any(a[1] & a[2])


def test_masks_on_unlabelled_nodes_are_refused():
    labels = np.array([0, 1, -1])
    with pytest.raises(SuperGCNError, match="unlabelled"):
        build_graph("x", [0], [1], np.zeros((3, 2)), labels, np.array([1, 1, 1], bool), np.zeros(3, bool),
                    np.zeros(3, bool))


def test_dropping_self_loops_removes_the_diagonal_and_nothing_else(awkward_graph):
    dropped = with_self_loop_policy(awkward_graph, "drop")
    adjacency = awkward_graph.adjacency()
    expected = adjacency - sp.diags(adjacency.diagonal())
    expected.eliminate_zeros()
    assert (dropped.adjacency() != expected).nnz == 0 and dropped.num_self_loops == 0
    assert dropped.provenance["self_loops_dropped"] == awkward_graph.num_self_loops >= 2
    kept = with_self_loop_policy(awkward_graph, "keep")
    assert (kept.adjacency() != adjacency).nnz == 0 and kept.provenance["self_loops_dropped"] == 0


def test_the_manifest_says_which_self_loop_policy_made_the_graph(tmp_path):
    from supergcn.data.datasets import prepare_dataset

    loops = prepare_dataset("synthetic-tiny").num_self_loops
    for policy, left in (("keep", loops), ("drop", 0)):
        result = run_cli("prepare", "synthetic-tiny", "--out", tmp_path / policy, "--self-loops", policy)
        assert result.returncode == 0, result.stderr
        meta = json.loads((tmp_path / policy / "meta.json").read_text())
        assert meta["provenance"]["self_loop_policy"] == policy and meta["self_loops"] == left


@pytest.mark.parametrize(("name", "change", "message"), [
    ("labels", lambda labels: np.where(np.arange(len(labels)) < 2, 3, labels),
     "2 labels in labels.npy are not below the manifest's 3 classes"),
    ("labels", lambda labels: labels[:-1], "labels.npy is int64[299], the manifest says int64[300]"),
    ("features", lambda features: features.astype(np.float64), "features.npy is float64[300, 6]"),
    ("val_mask", lambda mask: np.ones_like(mask), "nodes are in more than one of the train, validation and test"),
    ("test_mask", lambda mask: np.zeros_like(mask), "the manifest's split says"),
    ("indptr", lambda indptr: indptr - 1, "indptr.npy does not run from 0"),
    ("indices", lambda indices: indices.astype(np.float64), "the manifest says int32 or int64["),
])
def test_a_prepared_graph_that_contradicts_its_manifest_is_refused_on_load(tmp_path, awkward_graph, name, change,
                                                                           message):
    save_graph(awkward_graph, tmp_path / "g")
    np.save(tmp_path / "g" / f"{name}.npy", change(np.load(tmp_path / "g" / f"{name}.npy")))
    for mmap in (False, True):
        with pytest.raises(SuperGCNError, match="contradicts its manifest or itself") as refused:
            load_graph(tmp_path / "g", mmap=mmap)
        assert message in str(refused.value)


def test_overlapping_masks_are_refused_when_a_graph_is_built(awkward_graph):
    train = awkward_graph.train_mask.copy()
    train[np.flatnonzero(awkward_graph.test_mask)[:3]] = True
    with pytest.raises(SuperGCNError, match="the train, validation and test masks overlap"):
        build_graph("overlap", *awkward_edge_list(300), awkward_graph.features, awkward_graph.labels, train,
                    awkward_graph.val_mask, awkward_graph.test_mask)


def test_a_pass_over_the_adjacency_refuses_a_neighbour_outside_the_graph(tmp_path, awkward_graph):
    from supergcn.data.graph import check_neighbour_ids

    save_graph(awkward_graph, tmp_path / "g")
    indices = np.load(tmp_path / "g" / "indices.npy")
    indices[5] = 300
    np.save(tmp_path / "g" / "indices.npy", indices)
    with pytest.raises(SuperGCNError, match=r"neighbour ids outside 0\.\.299 \(in rows 0\.\.299"):
        check_neighbour_ids(load_graph(tmp_path / "g", mmap=True))


def test_labels_below_minus_one_are_outside_the_classes(awkward_graph):
    labels = awkward_graph.labels.copy()
    labels[17] = -9  # a float label file's NaN becomes a large negative integer
    bad = dataclasses.replace(awkward_graph, labels=labels, train_mask=np.zeros_like(awkward_graph.train_mask),
                              val_mask=np.zeros_like(awkward_graph.val_mask),
                              test_mask=np.zeros_like(awkward_graph.test_mask))
    with pytest.raises(SuperGCNError, match=r"1 label lies outside the classes \(the first, -9, at node 17"):
        bad.validate()


def test_the_hashing_pass_counts_non_finite_features(awkward_graph, tmp_path, monkeypatch):
    """Read a block at a time (a small block here), every NaN and infinity is counted and
    the first located; the hash is that of the same arrays hashed whole."""
    from supergcn.data import digests

    features = awkward_graph.features.copy()
    features[5, 2], features[250, 0], features[251, 1] = np.inf, np.nan, -np.inf
    graph = dataclasses.replace(awkward_graph, features=features)
    whole = graph.content_hash()
    monkeypatch.setattr(digests, "_HASH_BLOCK_BYTES", 4 * features.shape[1] * 7)
    with pytest.raises(SuperGCNError, match=r"3 NaN or infinite feature values \(the first at node 5, feature 2\)"):
        save_graph(graph, tmp_path / "g")
    assert not (tmp_path / "g").exists()
    meta = save_graph(graph, tmp_path / "g", allow_nonfinite_features=True)
    assert meta["nonfinite_features"] == 3 and meta["hash"] == whole
