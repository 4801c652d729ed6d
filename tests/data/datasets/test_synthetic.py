import numpy as np
import pytest

from supergcn.data.datasets import prepare_dataset, synthetic
from supergcn.data.datasets.synthetic import GRAPH500_ABC, planted_partition_graph, rmat_edges, rmat_graph


def test_generators_are_deterministic_per_seed():
    a = prepare_dataset("synthetic-tiny", seed=5)
    b = prepare_dataset("synthetic-tiny", seed=5)
    c = prepare_dataset("synthetic-tiny", seed=6)
    assert a.content_hash() == b.content_hash()
    assert a.content_hash() != c.content_hash()


def test_planted_partition_has_exact_edges_homophily_and_heavy_tail():
    g = planted_partition_graph("pp", 5000, 30000, 16, 6, (0.6, 0.2, 0.2), seed=1, homophily=0.7)
    assert g.num_edges == 2 * 30000  # no self loops, each undirected edge twice
    rows = np.repeat(np.arange(g.num_nodes), g.in_degree)
    same = np.mean(g.labels[rows] == g.labels[g.indices])
    # Inter-class draws land in the same class with probability ~ sum of squared class
    # shares, so the measured homophily sits a little above the parameter.
    assert 0.7 <= same <= 0.8
    degree = g.in_degree
    assert degree.max() > 10 * degree.mean(), "degrees are not heavy-tailed"


@pytest.mark.parametrize("chunk", [None, 1000])
def test_planted_partition_stream_is_pinned(chunk, monkeypatch):
    """The faster de-duplication kept the random stream: these hashes come from the
    np.union1d generator it replaced (synthetic-tiny needs one sampling round, the dense
    graph several); so does drawing a chunk at a time (to show progress)."""
    if chunk is not None:
        monkeypatch.setattr(synthetic, "_EDGE_CHUNK", chunk)
    assert prepare_dataset("synthetic-tiny", seed=0).content_hash() == "195c9edba2ed59ac77cc7e6f542292f7"
    dense = planted_partition_graph("dense", 400, 8000, 4, 3, (0.6, 0.2, 0.2), seed=3)
    assert dense.content_hash() == "e5b532da52874708c9c789757b814daf"


def test_dense_planted_partition_has_exactly_the_requested_simple_edges():
    """400 nodes and 8,000 of the 79,800 possible edges: heavy hubs collide often, so
    several sampling rounds are merged and the surplus trimmed."""
    g = planted_partition_graph("dense", 400, 8000, 4, 3, (0.6, 0.2, 0.2), seed=3)
    rows = np.repeat(np.arange(g.num_nodes), g.in_degree)
    assert g.num_edges == 2 * 8000
    assert not np.any(rows == g.indices), "self loops"
    keys = rows * g.num_nodes + g.indices
    assert len(np.unique(keys)) == len(keys), "duplicate edges"


def test_planted_partition_features_carry_class_signal():
    g = planted_partition_graph("pp", 3000, 15000, 32, 4, (0.6, 0.2, 0.2), seed=2, feature_signal=0.3)
    centroids = np.stack([g.features[g.train_mask & (g.labels == c)].mean(0) for c in range(4)])
    test = g.test_mask
    predicted = np.argmin(((g.features[test, None, :] - centroids[None]) ** 2).sum(-1), axis=1)
    accuracy = np.mean(predicted == g.labels[test])
    assert 0.4 < accuracy < 0.99, accuracy  # informative, but not trivially separable
    weaker = planted_partition_graph("pp", 3000, 15000, 32, 4, (0.6, 0.2, 0.2), seed=2, feature_signal=0.1)
    centroids = np.stack([weaker.features[weaker.train_mask & (weaker.labels == c)].mean(0) for c in range(4)])
    predicted = np.argmin(((weaker.features[test, None, :] - centroids[None]) ** 2).sum(-1), axis=1)
    assert np.mean(predicted == weaker.labels[test]) < accuracy  # the signal parameter controls difficulty


def test_rmat_quadrant_frequencies_follow_graph500_parameters():
    rng = np.random.default_rng(0)
    src, dst = rmat_edges(rng, scale=1, count=200_000)
    a, b, c = GRAPH500_ABC
    freq = np.bincount(src * 2 + dst, minlength=4) / len(src)
    np.testing.assert_allclose(freq, [a, b, c, 1 - a - b - c], atol=0.005)


def test_rmat_graph_shape():
    g = rmat_graph("r", scale=10, edge_factor=8, feature_dim=4, num_classes=3, split=(0.6, 0.2, 0.2), seed=0)
    assert g.num_nodes == 1024
    assert 0.5 * 8 * 1024 < g.num_edges / 2 <= 8 * 1024  # duplicates removed
    assert g.in_degree.max() > 8 * g.in_degree.mean()


@pytest.mark.parametrize("name", ["rmat-0", "rmat-99", "nope"])
def test_bad_dataset_names_are_refused(name):
    from supergcn.errors import SuperGCNError
    with pytest.raises(SuperGCNError):
        prepare_dataset(name)
