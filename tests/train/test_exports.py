import os

import numpy as np
import pytest
import torch

from supergcn.train import exports


class OneRank:
    """The collective calls save_logits makes, for a job of one rank."""

    def allreduce(self, value):
        return value

    def Get_rank(self):
        return 0

    def Barrier(self):
        pass


def test_logits_land_in_the_original_node_order(tmp_path):
    """Rows owned in a shuffled order, with runs of consecutive ids and gaps between them."""
    ids = np.random.default_rng(0).permutation(50)
    logits = torch.randn(50, 3)
    exports.save_logits(OneRank(), ids, logits, tmp_path / "out" / "logits.npy")
    saved = np.load(tmp_path / "out" / "logits.npy")
    expected = np.empty((50, 3), dtype=np.float32)
    expected[ids] = logits.numpy()
    np.testing.assert_array_equal(saved, expected)
    assert not list((tmp_path / "out").glob(".*"))


def test_a_failed_write_leaves_nothing_behind(tmp_path, monkeypatch):
    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full_disk)
    with pytest.raises(OSError, match="No space"):
        exports.save_logits(OneRank(), np.arange(10), torch.zeros(10, 2), tmp_path / "logits.npy")
    assert list(tmp_path.iterdir()) == []
