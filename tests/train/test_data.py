import numpy as np
import pytest

from supergcn.data.datasets import prepare_dataset
from supergcn.data.graph import save_graph
from supergcn.errors import SuperGCNError
from supergcn.partition.rows import NODE_ARRAYS
from supergcn.partition.store import load_partition, run_partition
from supergcn.plan.store import run_plan
from supergcn.train.config import TrainConfig
from supergcn.train.data import load_rank_data


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("rank-data")
    graph = prepare_dataset("synthetic-tiny", seed=0)
    meta = save_graph(graph, root / "g")
    run_partition(graph, meta["hash"], 3, root / "p")
    partition, part_manifest = load_partition(root / "p", meta["hash"])
    run_plan(graph, meta["hash"], partition, part_manifest["partition_hash"], "hybrid", root / "plan")
    return root, graph, partition


def config(root):
    return TrainConfig(graph=root / "g", partition=root / "p", plan=root / "plan", out=root / "m.jsonl")


def test_a_rank_loads_its_rows_without_the_partition_array_or_the_graphs_node_arrays(prepared, tmp_path):
    """A rank reads the manifests, its own plan file and its slice of the rank-ordered
    rows: with parts.npy (N ids) and the graph's own node arrays gone, every rank still
    gets exactly the rows the partition gives it."""
    root, graph, partition = prepared
    gone = [root / "p" / "parts.npy", *(root / "g" / f"{name}.npy" for name in NODE_ARRAYS)]
    saved = {path: path.read_bytes() for path in gone}
    for path in gone:
        path.unlink()
    try:
        for rank in range(3):
            data = load_rank_data(config(root), rank, 3)
            owned = partition.new_to_old[partition.offsets[rank]:partition.offsets[rank + 1]]
            np.testing.assert_array_equal(data.owned_old_ids, owned)
            np.testing.assert_array_equal(data.x.numpy(), graph.features[owned])
            np.testing.assert_array_equal(data.y.numpy(), graph.labels[owned])
            np.testing.assert_array_equal(data.train_mask.numpy(), graph.train_mask[owned])
    finally:
        for path, data in saved.items():
            path.write_bytes(data)
    with pytest.raises(SuperGCNError, match="3 ranks"):
        load_rank_data(config(root), 0, 2)


def test_a_rank_refuses_a_plan_file_that_does_not_match_its_hash(prepared):
    root, _, _ = prepared
    rank_file = root / "plan" / "rank_00001.npz"
    saved = rank_file.read_bytes()
    rank_file.write_bytes(saved[:-1] + bytes([saved[-1] ^ 1]))
    try:
        load_rank_data(config(root), 0, 3)  # the other ranks' files are not read
        with pytest.raises(SuperGCNError, match="does not match the hash"):
            load_rank_data(config(root), 1, 3)
    finally:
        rank_file.write_bytes(saved)


@pytest.mark.parametrize("name", ["rank_hashes.npy", "pairs.npz"])
def test_plan_json_vouches_for_the_hash_list_and_the_pair_statistics(prepared, name):
    """A hash list or pair statistics from another plan (or damaged) is refused: by rank 0
    for the hash list, by whoever reads the statistics for the pairs."""
    from supergcn.plan.store import read_plan_pairs

    root, _, _ = prepared
    path = root / "plan" / name
    saved = path.read_bytes()
    path.write_bytes(saved[:-1] + bytes([saved[-1] ^ 1]))
    try:
        with pytest.raises(SuperGCNError, match=f"{name} does not match the hash plan.json records"):
            if name == "pairs.npz":
                read_plan_pairs(root / "plan")
            else:
                load_rank_data(config(root), 0, 3)
        path.unlink()
        with pytest.raises(SuperGCNError, match=f"{name} is missing"):
            read_plan_pairs(root / "plan") if name == "pairs.npz" else load_rank_data(config(root), 0, 3)
    finally:
        path.write_bytes(saved)


def test_a_rank_refuses_rows_that_do_not_match_their_hashes(prepared):
    """A changed row of rank 1's slice is refused by rank 1 (the others read other
    slices); a changed hash list by rank 0, which checks it against partition.json."""
    root, _, partition = prepared
    labels = root / "p" / "rows_labels.npy"
    saved = labels.read_bytes()
    data = bytearray(saved)
    rows_after = len(partition.parts) - int(partition.offsets[1])  # labels are int64, at the file's end
    data[len(saved) - 8 * rows_after] ^= 1  # the first byte of rank 1's first label
    labels.write_bytes(bytes(data))
    try:
        load_rank_data(config(root), 2, 3)
        with pytest.raises(SuperGCNError, match="the rows of rank 1 .* do not match"):
            load_rank_data(config(root), 1, 3)
    finally:
        labels.write_bytes(saved)
    hashes = root / "p" / "row_hashes.npy"
    saved = hashes.read_bytes()
    hashes.write_bytes(saved[:-1] + bytes([saved[-1] ^ 1]))
    try:
        with pytest.raises(SuperGCNError, match="row_hashes.npy does not match the hash partition.json records"):
            load_rank_data(config(root), 0, 3)
    finally:
        hashes.write_bytes(saved)


@pytest.mark.parametrize("block_bytes", [7 * 4 * 32, 1 << 24])
def test_bf16_features_are_read_rounded_as_torch_rounds_them_and_still_checked(prepared, monkeypatch, block_bytes):
    """A bf16 run's features come in bfloat16, equal to torch's rounding of the float32 rows,
    read a block at a time (7 feature rows: many blocks, the last short) and checked against the
    hash of the rows as written; the other arrays are the rows as they are."""
    import torch

    from supergcn.partition import rows

    monkeypatch.setattr(rows, "_BLOCK_BYTES", block_bytes)
    root, graph, partition = prepared
    for rank in range(3):
        data = load_rank_data(config(root), rank, 3, bfloat16_features=True)
        owned = partition.new_to_old[partition.offsets[rank]:partition.offsets[rank + 1]]
        assert data.x.dtype == torch.bfloat16
        assert torch.equal(data.x, torch.from_numpy(graph.features[owned]).to(torch.bfloat16))
        np.testing.assert_array_equal(data.y.numpy(), graph.labels[owned])
    features = root / "p" / "rows_features.npy"
    saved = features.read_bytes()
    features.write_bytes(saved[:-1] + bytes([saved[-1] ^ 1]))  # rank 2's last feature
    try:
        with pytest.raises(SuperGCNError, match="the rows of rank 2 .* do not match"):
            load_rank_data(config(root), 2, 3, bfloat16_features=True)
    finally:
        features.write_bytes(saved)


LOAD_PEAK = """
import sys
from pathlib import Path
from supergcn.data.storage import peak_memory_mib
from supergcn.train.config import TrainConfig
from supergcn.train.data import load_rank_data
root = Path(sys.argv[1])
config = TrainConfig(graph=root / "g", partition=root / "p", plan=root / "plan", out=root / "m.jsonl")
before = peak_memory_mib()
data = load_rank_data(config, 0, 1, bfloat16_features=sys.argv[2] == "bf16")
print(peak_memory_mib() - before, data.x.nbytes / 2**20)
"""


def test_loading_a_ranks_features_holds_them_once(tmp_path):
    """A rank's peak grows by its features once while it loads them (not by the mapped
    pages, the copy and a copy to hash: 3x), half that in bf16: 120,000 nodes x 256
    float32 features (117 MiB) at P = 1, each load in a fresh process."""
    import subprocess
    import sys

    from supergcn.data.graph import build_graph
    from supergcn.partition import rows

    rng = np.random.default_rng(0)
    n = 120_000
    src = rng.integers(0, n, 4 * n)
    mask = rng.random(n) < 0.5
    graph = build_graph("wide", src, (src + 1) % n, rng.standard_normal((n, 256), dtype=np.float32),
                        rng.integers(0, 4, n), mask, ~mask, np.zeros(n, dtype=bool))
    meta = save_graph(graph, tmp_path / "g")
    run_partition(graph, meta["hash"], 1, tmp_path / "p")
    partition, part_manifest = load_partition(tmp_path / "p", meta["hash"])
    run_plan(graph, meta["hash"], partition, part_manifest["partition_hash"], "hybrid", tmp_path / "plan")
    features_mib = n * 256 * 4 / 2**20
    for precision, share in (("fp32", 1.0), ("bf16", 0.5)):
        result = subprocess.run([sys.executable, "-c", LOAD_PEAK, str(tmp_path), precision], capture_output=True,
                                text=True, check=True)
        grown, held = map(float, result.stdout.split())
        assert held == pytest.approx(share * features_mib)
        # on top: the rank's other rows and its plan (~14 MiB here), a block's mapped pages
        # and, in bf16, the reused float32 block (16 MiB each); a whole second copy is 59-234 MiB
        assert grown < share * features_mib + 3 * rows._BLOCK_BYTES / 2**20 + 10, (precision, grown)
