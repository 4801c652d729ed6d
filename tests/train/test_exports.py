import os

import numpy as np
import pytest
import torch

from supergcn.errors import SuperGCNError
from supergcn.train import exports


@pytest.fixture
def one_rank():
    """A job of one rank: MPI's own communicator of this process."""
    from mpi4py import MPI

    return MPI.COMM_SELF


def test_logits_land_in_the_original_node_order(tmp_path, one_rank):
    """Rows owned in a shuffled order, with runs of consecutive ids and gaps between them."""
    ids = np.random.default_rng(0).permutation(50)
    logits = torch.randn(50, 3)
    exports.save_logits(one_rank, ids, logits, tmp_path / "out" / "logits.npy")
    saved = np.load(tmp_path / "out" / "logits.npy")
    expected = np.empty((50, 3), dtype=np.float32)
    expected[ids] = logits.numpy()
    np.testing.assert_array_equal(saved, expected)
    assert not list((tmp_path / "out").glob(".*"))


def test_a_full_disk_is_one_error_naming_the_need_and_leaves_nothing(tmp_path, monkeypatch, one_rank):
    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full_disk)
    with pytest.raises(SuperGCNError, match=r"no space left for .*logits\.npy: it needs 80 B \(.* free there now\)"):
        exports.save_logits(one_rank, np.arange(10), torch.zeros(10, 2), tmp_path / "logits.npy")
    assert list(tmp_path.iterdir()) == []
