"""DistGNN's delayed remote partial aggregates (cd-r, 0c) against hand-worked values,
synchronous ``pre`` and training on the graph without its cut edges."""

from pathlib import Path

import numpy as np
import pytest
import torch

from supergcn.data.datasets import prepare_dataset
from supergcn.data.graph import Graph, load_graph, read_graph_meta, save_graph
from supergcn.methods.distgnn.exchange import bucket_rows
from supergcn.partition.partition import Partition
from supergcn.partition.store import load_partition, run_partition, save_partition
from supergcn.plan.store import load_rank_plan, run_plan
from supergcn.train.metrics import read_metrics

from conftest import run_mpi, run_rank_job

COMMON = ["--hidden", 16, "--num-layers", 3, "--epochs", 6]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """synthetic-tiny in 3 parts with its pre plan, and the same graph and parts without the cut edges."""
    root = tmp_path_factory.mktemp("delayed")
    meta = save_graph(prepare_dataset("synthetic-tiny"), root / "g")
    graph = load_graph(root / "g")
    manifest = run_partition(graph, meta["hash"], 3, root / "p")
    partition, _ = load_partition(root / "p")
    run_plan(graph, meta["hash"], partition, manifest["partition_hash"], "pre", root / "plan")

    adjacency = graph.adjacency().tocoo()
    kept = partition.parts[adjacency.row] == partition.parts[adjacency.col]
    cut_free = (adjacency.__class__((np.ones(kept.sum()), (adjacency.row[kept], adjacency.col[kept])),
                                    shape=adjacency.shape)).tocsr()
    cut_free.sort_indices()
    local = Graph(graph.name, cut_free.indptr.astype(graph.indptr.dtype), cut_free.indices.astype(graph.indices.dtype),
                  graph.features, graph.labels, graph.train_mask, graph.val_mask, graph.test_mask)
    local_meta = save_graph(local, root / "g-uncut")
    save_partition(Partition(partition.parts, 3), local, local_meta["hash"], root / "p-uncut", ["nodes"], 0.0)
    local_partition, local_manifest = load_partition(root / "p-uncut")
    run_plan(local, local_meta["hash"], local_partition, local_manifest["partition_hash"], "pre",
             root / "plan-uncut")
    return root


def train(root, out, *extra, graph="g", partition="p", plan="plan"):
    result = run_mpi(3, "train", "--graph", root / graph, "--partition", root / partition, "--plan", root / plan,
                     "--out", out, *COMMON, *extra)
    assert result.returncode == 0, result.stderr
    return read_metrics(out)


def test_buckets_cut_every_peer_block_into_contiguous_chunks():
    rows, sizes = bucket_rows(np.array([3, 0, 5]), 2, 1)
    # Peer 0: rows 0-2, bucket 1 = rows 1..2; peer 2: rows 3-7, bucket 1 = rows 5..7.
    assert rows.tolist() == [1, 2, 5, 6, 7] and sizes.tolist() == [2, 0, 3]
    for counts in ([7, 1, 0, 12], [2, 2]):
        chunks = [bucket_rows(np.array(counts), 5, q)[0] for q in range(5)]
        assert sorted(np.concatenate(chunks).tolist()) == list(range(sum(counts)))


def test_the_value_added_at_pass_t_is_the_partial_sum_of_pass_t_minus_r():
    run_rank_job(Path(__file__).with_name("distgnn_job.py"), 2)


@pytest.fixture(scope="module")
def synchronous(workspace, tmp_path_factory):
    """The synchronous ``pre`` run's epochs and final logits (the cd-0 and cd-r tests read
    the one run)."""
    out = tmp_path_factory.mktemp("sync")
    _, epochs, _ = train(workspace, out / "sync.jsonl", "--schedule", "sync", "--save-logits", out / "sync.npy")
    return epochs, np.load(out / "sync.npy")


def test_cd0_runs_the_synchronous_pre_exchange(workspace, synchronous, tmp_path):
    """cd-0 is DistGNN's name for the exact exchange: the same run as ``pre``, gradients
    included (DRPA's own cd-0 drops the remote gradient; see supergcn.methods.distgnn)."""
    _, epochs, _ = train(workspace, tmp_path / "cd0.jsonl", "--schedule", "cd-0", "--save-logits",
                         tmp_path / "cd0.npy")
    sync_epochs, sync_logits = synchronous
    assert [e["loss"] for e in epochs] == [e["loss"] for e in sync_epochs]
    assert [e["bytes"]["sent_total"] for e in epochs] == [e["bytes"]["sent_total"] for e in sync_epochs]
    np.testing.assert_array_equal(np.load(tmp_path / "cd0.npy"), sync_logits)


def test_0c_trains_as_the_graph_without_its_cut_edges(workspace, tmp_path):
    _, never, _ = train(workspace, tmp_path / "0c.jsonl", "--schedule", "0c", "--save-model", tmp_path / "0c.pt")
    _, uncut, _ = train(workspace, tmp_path / "uncut.jsonl", "--save-model", tmp_path / "uncut.pt",
                        graph="g-uncut", partition="p-uncut", plan="plan-uncut")
    np.testing.assert_allclose([e["loss"] for e in never], [e["loss"] for e in uncut], rtol=1e-5)
    assert all(e["bytes"]["sent_total"] == 0 for e in never)
    ours, reference = torch.load(tmp_path / "0c.pt"), torch.load(tmp_path / "uncut.pt")
    for key in ours:
        torch.testing.assert_close(ours[key], reference[key], rtol=1e-4, atol=1e-5)


def test_cd_r_sends_one_bucket_per_layer_and_epoch(workspace, synchronous, tmp_path):
    delay, hidden = 3, COMMON[1]
    _, epochs, _ = train(workspace, tmp_path / "cd3.jsonl", "--schedule", f"cd-{delay}")
    plans = [load_rank_plan(workspace / "plan", rank) for rank in range(3)]
    features = load_graph(workspace / "g").features.shape[1]
    # SAGE aggregates the narrower side of each layer: min(in, out) floats per row.
    classes = int(load_graph(workspace / "g").labels.max()) + 1
    widths = [min(features, hidden), hidden, min(hidden, classes)]
    for epoch in epochs:
        bucket = (epoch["epoch"] - 1) % delay
        rows = sum(counts * (bucket + 1) // delay - counts * bucket // delay
                   for plan in plans for counts in plan.send_counts)
        assert epoch["bytes"]["sent_total"] == rows * sum(widths) * 4
    one_epoch_pre = synchronous[0][1]["bytes"]["sent_total"]
    per_cycle = sum(e["bytes"]["sent_total"] for e in epochs[:delay])
    # Over r epochs cd-r sends every partial row forward once; pre sends them forward and back each epoch.
    assert per_cycle * 2 == one_epoch_pre


def test_delayed_schedules_refuse_what_they_cannot_do(workspace, tmp_path):
    for extra, words in ((["--bits", 2], "--bits 32"), (["--model", "gcn"], "--model sage")):
        result = run_mpi(3, "train", "--graph", workspace / "g", "--partition", workspace / "p", "--plan",
                         workspace / "plan", "--out", tmp_path / "m.jsonl", "--schedule", "cd-5", *extra)
        assert result.returncode == 2 and words in result.stderr, result.stderr
        assert not (tmp_path / "m.jsonl").exists()


def test_a_delayed_schedule_on_a_plan_without_partial_aggregates_is_refused(workspace, tmp_path):
    """cd-r delays a pre plan's partial aggregates: on a post plan (source rows) it would
    train something DistGNN does not define, under DistGNN's name."""
    graph = load_graph(workspace / "g")
    partition, manifest = load_partition(workspace / "p")
    run_plan(graph, read_graph_meta(workspace / "g")["hash"], partition, manifest["partition_hash"], "post",
             tmp_path / "post")
    result = run_mpi(3, "train", "--graph", workspace / "g", "--partition", workspace / "p", "--plan",
                     tmp_path / "post", "--out", tmp_path / "m.jsonl", "--schedule", "cd-5")
    assert result.returncode == 2 and "DistGNN runs on a pre plan" in result.stderr, result.stderr
    assert "--strategy pre" in result.stderr and not (tmp_path / "m.jsonl").exists()
