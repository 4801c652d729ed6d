"""Checkpoints: what is saved comes back, and a checkpoint of another run is ignored."""

import pytest
import torch
from mpi4py import MPI

from supergcn.errors import SuperGCNError
from supergcn.train.checkpoint import Checkpointer
from supergcn.train.config import TrainConfig


def model_and_optimizer(width=4, seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Linear(3, width)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    model(torch.ones(2, 3)).sum().backward()
    optimizer.step()
    return model, optimizer


def test_due_only_with_a_path_and_a_period(tmp_path):
    assert [Checkpointer(tmp_path / "c.pt", 5, MPI.COMM_SELF, "f").due(e) for e in (4, 5, 10)] == [False, True, True]
    assert not Checkpointer(None, 5, MPI.COMM_SELF, "f").due(5)
    assert not Checkpointer(tmp_path / "c.pt", 0, MPI.COMM_SELF, "f").due(5)


def test_saved_state_comes_back(tmp_path):
    path = tmp_path / "c.pt"
    model, optimizer = model_and_optimizer()
    saver = Checkpointer(path, 1, MPI.COMM_SELF, "fingerprint")
    saver.save(2, model, optimizer, ("rng", 11), [], {"val_acc": 0.4, "epoch": 1, "test_acc": 0.3})
    saver.save(3, model, optimizer, ("rng", 17), [{"epoch": 1}], {"val_acc": 0.5, "epoch": 2, "test_acc": 0.4})
    # The rank's own state beside it, the previous checkpoint's gone, no temporary left.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pt", "c.pt.epoch3.rank0"]
    fresh, fresh_optimizer = model_and_optimizer(seed=1)
    restored = Checkpointer(path, 1, MPI.COMM_SELF, "fingerprint").restore(fresh, fresh_optimizer, epochs=10)
    assert restored.epoch == 3 and restored.rank_state == ("rng", 17)
    assert restored.records == [{"epoch": 1}] and restored.best["epoch"] == 2
    for mine, saved in zip(fresh.state_dict().values(), model.state_dict().values()):
        assert torch.equal(mine, saved)
    assert fresh_optimizer.state_dict()["state"][0]["step"] == optimizer.state_dict()["state"][0]["step"]


@pytest.mark.parametrize("fingerprint, width, epochs, reason", [
    ("other", 4, 10, "another configuration"),
    ("fingerprint", 4, 2, "past the 2 epochs"),
    ("fingerprint", 5, 10, "other parameters"),
])
def test_a_checkpoint_of_another_run_is_ignored(tmp_path, capsys, fingerprint, width, epochs, reason):
    path = tmp_path / "c.pt"
    model, optimizer = model_and_optimizer()
    Checkpointer(path, 1, MPI.COMM_SELF, "fingerprint").save(3, model, optimizer, None, [], {})
    other, other_optimizer = model_and_optimizer(width=width, seed=1)
    before = [t.clone() for t in other.state_dict().values()]
    assert Checkpointer(path, 1, MPI.COMM_SELF, fingerprint).restore(other, other_optimizer, epochs) is None
    assert reason in capsys.readouterr().out
    assert all(torch.equal(a, b) for a, b in zip(other.state_dict().values(), before))


@pytest.mark.parametrize("changed", [{"kernel": "torch"}, {"overlap": False}, {"model": "gat", "overlap": False}])
def test_the_kernels_and_the_overlap_are_part_of_the_trajectory(changed):
    """The torch kernels sum in another order than numba's, and GAT's owner merges its
    softmax in another order without the overlap: a checkpoint of one is not resumed by the other."""
    paths = {"graph": "g", "partition": "p", "plan": "q", "out": "o.jsonl"}
    base = {key: value for key, value in changed.items() if key == "model"}
    hashes = {"graph_hash": "a", "partition_hash": "b", "plan_hash": "c"}
    assert (TrainConfig(**paths, **base).trajectory_fingerprint(hashes)
            != TrainConfig(**paths, **changed).trajectory_fingerprint(hashes))


def test_a_rank_state_of_another_checkpoint_is_refused(tmp_path):
    path = tmp_path / "c.pt"
    model, optimizer = model_and_optimizer()
    Checkpointer(path, 1, MPI.COMM_SELF, "fingerprint").save(3, model, optimizer, ("rng", 17), [], {})
    rank_file = tmp_path / "c.pt.epoch3.rank0"
    torch.save({"epoch": 3, "fingerprint": "another run", "rank_state": None}, rank_file)
    with pytest.raises(SuperGCNError, match="does not belong to checkpoint"):
        Checkpointer(path, 1, MPI.COMM_SELF, "fingerprint").restore(model, optimizer, epochs=10)
    rank_file.unlink()
    with pytest.raises(SuperGCNError, match="has no state of rank 0"):
        Checkpointer(path, 1, MPI.COMM_SELF, "fingerprint").restore(model, optimizer, epochs=10)


def test_missing_checkpoint_and_discard(tmp_path):
    path = tmp_path / "c.pt"
    model, optimizer = model_and_optimizer()
    checkpointer = Checkpointer(path, 1, MPI.COMM_SELF, "f")
    assert checkpointer.restore(model, optimizer, 10) is None
    checkpointer.save(1, model, optimizer, None, [], {})
    checkpointer.discard()
    # Its rank states go too, and with them the folder they leave empty.
    assert not tmp_path.exists()


def test_numpy_arrays_in_the_rank_state_come_back(tmp_path):
    """DistGNN's rows in flight and AdaQP's assignments are numpy arrays: the safe
    unpickler must allow them (and nothing else)."""
    import numpy as np

    path = tmp_path / "c.pt"
    model, optimizer = model_and_optimizer()
    rows = {"rows": [np.arange(6, dtype=np.float32).reshape(2, 3)], "bits": (np.array([2, 8], dtype=np.int8),)}
    Checkpointer(path, 1, MPI.COMM_SELF, "f").save(2, model, optimizer, rows, [], {})
    restored = Checkpointer(path, 1, MPI.COMM_SELF, "f").restore(*model_and_optimizer(seed=1), epochs=5)
    np.testing.assert_array_equal(restored.rank_state["rows"][0], rows["rows"][0])
    assert restored.rank_state["bits"][0].dtype == np.int8


class Exploit:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os
        return os.system, (f"touch {self.marker}",)


@pytest.mark.parametrize("write, message", [
    (lambda path, marker: path.write_bytes(b"not a checkpoint at all"), "damaged or not a supergcn checkpoint"),
    (lambda path, marker: torch.save({"model": Exploit(marker)}, path), "damaged or not a supergcn checkpoint"),
    (lambda path, marker: torch.save({"weight": torch.zeros(2)}, path), "a torch file but not a supergcn checkpoint"),
])
def test_a_foreign_checkpoint_is_refused_without_running_it(tmp_path, write, message):
    from supergcn.distributed.ranks import CollectiveError

    path, marker = tmp_path / "c.pt", tmp_path / "exploited"
    write(path, marker)
    with pytest.raises(CollectiveError, match=message) as caught:
        Checkpointer(path, 1, MPI.COMM_SELF, "f").restore(*model_and_optimizer(), epochs=5)
    assert "delete it to train from scratch" in str(caught.value)
    assert not marker.exists()
