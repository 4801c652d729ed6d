"""Made-up features and labels: the seed decides them, the features are written once."""

import numpy as np

from supergcn.data.datasets import made_up


def test_made_up_features_follow_the_seed_and_are_written_once(tmp_path, monkeypatch):
    monkeypatch.setattr(made_up, "BLOCK_ROWS", 300)  # several blocks
    first = made_up.made_up_features(tmp_path / "a.npy", 1_000, 16, seed=1)
    stamp = (tmp_path / "a.npy").stat().st_mtime_ns
    again = made_up.made_up_features(tmp_path / "a.npy", 1_000, 16, seed=1)
    other = made_up.made_up_features(tmp_path / "b.npy", 1_000, 16, seed=2)
    np.testing.assert_array_equal(first, again)
    assert (tmp_path / "a.npy").stat().st_mtime_ns == stamp
    assert not np.array_equal(first, other) and abs(float(first.std()) - 1) < 0.05
    # Each block has its own stream: the second block is not the first one again.
    assert not np.array_equal(first[:300], first[300:600])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy", "b.npy"]


def test_made_up_labels_follow_the_seed():
    labels = made_up.made_up_labels(5_000, 7, seed=3)
    assert labels.min() == 0 and labels.max() == 6
    np.testing.assert_array_equal(labels, made_up.made_up_labels(5_000, 7, seed=3))
    assert not np.array_equal(labels, made_up.made_up_labels(5_000, 7, seed=4))
