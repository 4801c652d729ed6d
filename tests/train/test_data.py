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
