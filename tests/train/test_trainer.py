"""Distributed training under mpiexec: its metrics, failures, checkpoints, quantized
exchanges and label inputs (its models against PyG's: tests/train/test_models.py)."""

import json

import numpy as np
import pytest
import torch

from supergcn.data.graph import load_graph, save_graph
from supergcn.distributed.timing import BREAKDOWN, DETAIL
from supergcn.naming import STRATEGIES
from supergcn.partition.metis import partition_graph
from supergcn.partition.store import run_partition
from supergcn.plan.store import read_plan_pairs, run_plan
from supergcn.testing.ops import StandInOps
from supergcn.train.allocator import allocator_name, requested_library
from supergcn.train.gnn import GNN
from supergcn.train.metrics import read_metrics

from conftest import run_mpi

HIDDEN, LAYERS = 32, 3


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    from supergcn.data.datasets import prepare_dataset

    root = tmp_path_factory.mktemp("train")
    meta = save_graph(prepare_dataset("synthetic-tiny"), root / "g")
    graph = load_graph(root / "g")
    for parts in (1, 2, 3):
        manifest = run_partition(graph, meta["hash"], parts, root / f"p{parts}")
        partition = partition_graph(graph, parts)
        for strategy in STRATEGIES:
            run_plan(graph, meta["hash"], partition, manifest["partition_hash"], strategy, root / f"p{parts}{strategy}")
    return root, graph


def train_args(root, parts, strategy, out, *extra):
    return ["train", "--graph", root / "g", "--partition", root / f"p{parts}", "--plan",
            root / f"p{parts}{strategy}", "--out", out, "--hidden", HIDDEN, "--num-layers", LAYERS, *extra]


@pytest.fixture(scope="module")
def hybrid_fp32_run(workspace, tmp_path_factory):
    """The metrics file of 3 epochs at P = 3 on the hybrid plan in float32 (the metrics test
    reads it, and the Int2 test compares with it)."""
    root, _ = workspace
    out = tmp_path_factory.mktemp("fp32") / "m.jsonl"
    result = run_mpi(3, *train_args(root, 3, "hybrid", out, "--epochs", 3, "--bits", 32))
    assert result.returncode == 0, result.stderr
    return out


def test_metrics_record_breakdown_bytes_and_provenance(workspace, hybrid_fp32_run):
    root, _ = workspace
    header, epochs, summary = read_metrics(hybrid_fp32_run)
    assert {"graph_hash", "partition_hash", "plan_hash", "versions", "git_commit", "hosts"} <= set(header)
    assert header["config"]["hidden"] == HIDDEN and header["threads_per_rank"] == 1
    library = requested_library()
    expected_allocator = "glibc" if library is None else allocator_name(str(library))
    assert header["allocator"]["name"] == expected_allocator
    assert header["allocator_per_rank"] == [expected_allocator] * 3
    assert len(summary["peak_memory_bytes_per_rank"]) == 3 and min(summary["peak_memory_bytes_per_rank"]) > 50e6
    plan = json.loads((root / "p3hybrid" / "plan.json").read_text())
    for epoch in epochs:
        per_rank = epoch["seconds"]["per_rank"]
        assert len(per_rank) == 3
        for seconds in per_rank:
            for phases in (BREAKDOWN, DETAIL):
                assert sum(seconds[k] for k in phases) == pytest.approx(seconds["total"], rel=1e-6)
            assert min(seconds[k] for k in ("aggregation", "communication", "dense", "elementwise", "optimizer")) > 0
        assert epoch["seconds"]["max"]["total"] == max(s["total"] for s in per_rank)
        # Forward widths: layer 1 aggregates the 32 input features, layer 2 the 32 hidden
        # ones, layer 3 the 5 class scores (it transforms first). Backward exchanges the
        # gradients of layers 2 and 3 only: the input features need none.
        rows = plan["total_rows_sent"]
        assert epoch["bytes"]["sent_total"] == rows * 4 * ((32 + HIDDEN + 5) + (HIDDEN + 5))
    assert summary["epochs"] == 3 and 0 <= summary["test_acc_at_best_val"] <= 1
    lowest = min(epochs, key=lambda e: e["val_loss"])
    assert summary["min_val_loss"] == lowest["val_loss"] and summary["min_val_loss_epoch"] == lowest["epoch"]
    assert summary["test_acc_at_min_val_loss"] == lowest["test_acc"]


def test_failing_rank_aborts_the_job_with_its_message(workspace, tmp_path):
    root, _ = workspace
    out = tmp_path / "m.jsonl"
    result = run_mpi(3, *train_args(root, 3, "hybrid", out, "--epochs", 5, "--fail-at-epoch", 2, "--fail-rank", 1),
                     timeout=120)
    assert result.returncode != 0
    assert "rank 1 of 3: error" in result.stderr and "injected fault at epoch 2" in result.stderr
    assert not out.exists()


# DistGNN's cd-3 and PipeGCN have rows in flight at the epoch-4 checkpoint (PipeGCN-GF also
# its moving averages), and adaptive bits were re-assigned after epochs 1 and 4: all are
# part of the state. The adaptive run restores all a plain hybrid run does (weights,
# optimizer, RNG) besides; a plain run's resume through Snakemake is
# tests/workflow/test_workflow.py's, and BNS-GCN's state (its pass count) is restored in
# tests/methods/bnsgcn_job.py.
@pytest.mark.parametrize("strategy, variant", [
    ("pre", ["--schedule", "cd-3"]), ("post", ["--schedule", "pipe-fg"]),
    ("hybrid", ["--bits", "adaptive", "--adaptive-period", 3, "--rounding", "stochastic"])])
def test_resume_reaches_the_same_weights_as_an_uninterrupted_run(workspace, tmp_path, strategy, variant):
    root, _ = workspace
    common = ["--epochs", 6, "--checkpoint-every", 2, *variant]
    straight = run_mpi(2, *train_args(root, 2, strategy, tmp_path / "a.jsonl", *common, "--checkpoint",
                                      tmp_path / "a.ckpt", "--save-model", tmp_path / "a.pt"))
    assert straight.returncode == 0, straight.stderr
    killed = run_mpi(2, *train_args(root, 2, strategy, tmp_path / "b.jsonl", *common, "--checkpoint",
                                    tmp_path / "b.ckpt", "--fail-at-epoch", 5, "--fail-rank", 1))
    assert killed.returncode != 0 and not (tmp_path / "b.jsonl").exists()
    assert torch.load(tmp_path / "b.ckpt", weights_only=False)["epoch"] == 4
    resumed = run_mpi(2, *train_args(root, 2, strategy, tmp_path / "b.jsonl", *common, "--checkpoint",
                                     tmp_path / "b.ckpt", "--resume", "--save-model", tmp_path / "b.pt"))
    assert resumed.returncode == 0, resumed.stderr
    a, b = torch.load(tmp_path / "a.pt"), torch.load(tmp_path / "b.pt")
    assert all(torch.equal(a[k], b[k]) for k in a)
    losses = [[e["loss"] for e in read_metrics(tmp_path / f"{n}.jsonl")[1]] for n in "ab"]
    assert losses[0] == losses[1] and len(losses[0]) == 6


def test_wrong_world_size_is_one_clear_error(workspace, tmp_path):
    """One rank for a plan of two (three ranks, and a plan of another partition, are among
    tests/cli/test_bad_inputs.py's bad inputs)."""
    root, _ = workspace
    result = run_mpi(1, *train_args(root, 2, "pre", tmp_path / "m.jsonl", "--epochs", 1), timeout=120)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert errors == ["supergcn train: error: plan " + str(root / "p2pre") +
                      " is for 2 ranks but 1 was started — launch with `mpiexec -n 2`"]


def test_nan_loss_stops_with_the_epoch(tmp_path):
    from supergcn.data.datasets import prepare_dataset

    graph = prepare_dataset("synthetic-tiny")
    graph.features[5, 3] = np.nan  # kept on purpose: prepare refuses it otherwise
    meta = save_graph(graph, tmp_path / "g", allow_nonfinite_features=True)
    manifest = run_partition(graph, meta["hash"], 2, tmp_path / "p2")
    run_plan(graph, meta["hash"], partition_graph(graph, 2), manifest["partition_hash"], "hybrid",
             tmp_path / "p2hybrid")
    result = run_mpi(2, *train_args(tmp_path, 2, "hybrid", tmp_path / "m.jsonl", "--epochs", 3), timeout=120)
    assert result.returncode == 2
    assert "loss became nan at epoch 1" in result.stderr
    assert not (tmp_path / "m.jsonl").exists()


def test_int2_exchange_moves_a_sixteenth_of_the_data(workspace, hybrid_fp32_run, tmp_path):
    from supergcn.kernels.wire import layer_bytes

    root, _ = workspace
    fp32, int2 = hybrid_fp32_run, tmp_path / "int2.jsonl"
    result = run_mpi(3, *train_args(root, 3, "hybrid", int2, "--epochs", 3, "--bits", 2))
    assert result.returncode == 0, result.stderr
    rows = read_plan_pairs(root / "p3hybrid")["rows"].tolist()
    widths = (32 + HIDDEN + 5) + (HIDDEN + 5)  # forward layers 1-3, backward layers 2-3
    data, params = layer_bytes(rows, 1, 2)
    for epoch_fp32, epoch_int2 in zip(read_metrics(fp32)[1], read_metrics(int2)[1]):
        assert epoch_int2["bytes"]["data_sent_total"] == data * widths
        assert epoch_int2["bytes"]["params_sent_total"] == params * 5  # one (zero point, scale) pair per row
        assert 15 * epoch_int2["bytes"]["data_sent_total"] <= epoch_fp32["bytes"]["data_sent_total"]
        assert epoch_fp32["bytes"]["params_sent_total"] == 0
        assert epoch_int2["seconds"]["max"]["quantization"] > 0
    # Evaluation exchanges float32, training converges anyway.
    losses = [e["loss"] for e in read_metrics(int2)[1]]
    assert losses[-1] < losses[0]


def test_bfloat16_exchange_sends_exactly_half_of_fp32s_bytes_every_epoch(workspace, hybrid_fp32_run, tmp_path):
    """--bits 16 (upstream's --num_bits 16) on the plan the fp32 run used: every epoch's data
    bytes are half of float32's, no parameters travel, and training follows float32's
    closely (a bfloat16 value keeps 8 significant bits)."""
    root, _ = workspace
    bf16 = tmp_path / "bf16.jsonl"
    result = run_mpi(3, *train_args(root, 3, "hybrid", bf16, "--epochs", 3, "--bits", 16))
    assert result.returncode == 0, result.stderr
    assert "bf16 exchange" in result.stdout.splitlines()[0]
    for epoch_fp32, epoch_bf16 in zip(read_metrics(hybrid_fp32_run)[1], read_metrics(bf16)[1], strict=True):
        assert 2 * epoch_bf16["bytes"]["data_sent_total"] == epoch_fp32["bytes"]["data_sent_total"] > 0
        assert epoch_bf16["bytes"]["params_sent_total"] == 0
        assert epoch_bf16["loss"] == pytest.approx(epoch_fp32["loss"], rel=0.02)


def test_bf16_compute_follows_fp32_exchanges_the_same_bytes_and_says_so(workspace, hybrid_fp32_run, tmp_path):
    """--precision bf16 at P = 3 on the fp32 run's plan: the first line and the header say
    what was picked and why, the exchange carries the same float32 bytes (the sums are
    float32), and training follows float32's within bfloat16's rounding; with --label-rate
    and Int2 (the paper's hybrid variant) it runs too."""
    root, _ = workspace
    bf16 = tmp_path / "bf16.jsonl"
    result = run_mpi(3, *train_args(root, 3, "hybrid", bf16, "--epochs", 3, "--bits", 32, "--precision", "bf16"))
    assert result.returncode == 0, result.stderr
    assert "fp32 exchange, bf16 compute" in result.stdout.splitlines()[0]
    header, epochs, _ = read_metrics(bf16)
    assert header["precision"] == {"asked": "bf16", "picked": "bf16", "reason": "asked for"}
    for epoch_fp32, epoch_bf16 in zip(read_metrics(hybrid_fp32_run)[1], epochs, strict=True):
        assert epoch_bf16["bytes"]["sent_total"] == epoch_fp32["bytes"]["sent_total"] > 0
        assert epoch_bf16["loss"] != epoch_fp32["loss"]
        assert epoch_bf16["loss"] == pytest.approx(epoch_fp32["loss"], rel=0.02)
    hybrid = tmp_path / "int2-lp.jsonl"
    result = run_mpi(3, *train_args(root, 3, "hybrid", hybrid, "--epochs", 3, "--bits", 2, "--label-rate", 0.5,
                                    "--input-norm", "--precision", "bf16"))
    assert result.returncode == 0, result.stderr
    assert all(np.isfinite(e["loss"]) for e in read_metrics(hybrid)[1])


def test_single_rank_int2_equals_fp32(workspace, tmp_path):
    root, _ = workspace
    outs = []
    for bits in (32, 2):
        out = tmp_path / f"{bits}.jsonl"
        assert run_mpi(1, *train_args(root, 1, "hybrid", out, "--epochs", 3, "--bits", bits)).returncode == 0
        outs.append([e["loss"] for e in read_metrics(out)[1]])
    assert outs[0] == outs[1]  # nothing is exchanged at P = 1


@pytest.mark.parametrize("rounding", ["nearest", "stochastic"])
def test_overlap_changes_timing_not_results(workspace, tmp_path, rounding):
    root, _ = workspace
    losses = []
    for overlap in ("--overlap", "--no-overlap"):
        out = tmp_path / f"{overlap}.jsonl"
        result = run_mpi(2, *train_args(root, 2, "hybrid", out, "--epochs", 3, "--bits", 2, "--rounding", rounding,
                                        overlap))
        assert result.returncode == 0, result.stderr
        losses.append([e["loss"] for e in read_metrics(out)[1]])
    assert losses[0] == losses[1]


def test_label_embedding_is_added_to_the_chosen_inputs_only():

    class Identity(StandInOps):
        """Aggregation stand-in: every layer sees only its own row."""

        def aggregate(self, x):
            return torch.zeros_like(x)

    torch.manual_seed(0)
    model = GNN("sage", 4, 8, 3, num_layers=1, dropout=0.0, label_propagation=True).eval()
    x = torch.randn(6, 4)
    labels = torch.tensor([2, 0])
    nodes = torch.tensor([1, 4])
    with torch.no_grad():
        plain = model(x, Identity(6))
        with_labels = model(x, Identity(6), nodes, labels)
        shifted = x.clone()
        shifted[nodes] += model.label_embedding.weight[labels]
        expected = model(shifted, Identity(6))
    torch.testing.assert_close(with_labels, expected)
    unchanged = torch.tensor([0, 2, 3, 5])
    torch.testing.assert_close(with_labels[unchanged], plain[unchanged])


def test_label_rate_splits_each_epochs_training_nodes(workspace):
    from mpi4py import MPI

    from supergcn.train.config import TrainConfig
    from supergcn.train.trainer import Trainer

    root, graph = workspace
    config = TrainConfig(graph=root / "g", partition=root / "p1", plan=root / "p1hybrid", out=root / "unused",
                         hidden=8, label_rate=0.62)
    trainer = Trainer(config, MPI.COMM_SELF)
    train_nodes = set(np.flatnonzero(graph.train_mask).tolist())
    expected_inputs = round(0.62 * len(train_nodes))
    assert trainer.labels.loss_denominator == len(train_nodes) - expected_inputs
    first, _ = trainer.labels.split()
    for _ in range(2):
        inputs, loss = trainer.labels.split()
        assert len(inputs) == expected_inputs and len(loss) == len(train_nodes) - expected_inputs
        assert set(inputs.tolist()) | set(loss.tolist()) == train_nodes  # P = 1: local ids are global ids
        assert not set(inputs.tolist()) & set(loss.tolist())
    assert not torch.equal(first, inputs), "the split must be redrawn every epoch"


@pytest.mark.parametrize("draw", ["exact", "bernoulli"])
def test_int2_with_label_propagation_trains(workspace, tmp_path, draw):
    root, _ = workspace
    out = tmp_path / "m.jsonl"
    result = run_mpi(2, *train_args(root, 2, "hybrid", out, "--epochs", 8, "--bits", 2, "--label-rate", 0.62,
                                    "--label-draw", draw, "--input-norm"))
    assert result.returncode == 0, result.stderr
    header, epochs, summary = read_metrics(out)
    assert header["config"]["label_rate"] == 0.62 and header["config"]["input_norm"]
    assert header["config"]["label_draw"] == draw
    assert epochs[-1]["loss"] < epochs[0]["loss"]
    assert summary["identical_parameters"]


def test_a_run_without_validation_nodes_reports_no_best_epoch_not_zero(tmp_path):
    """Without validation nodes there is no best epoch: the summary says None ("not
    available" in the tables), not a test accuracy of 0 %."""
    from dataclasses import replace

    from supergcn.data.datasets import prepare_dataset

    graph = prepare_dataset("synthetic-tiny")
    graph = replace(graph, val_mask=np.zeros_like(graph.val_mask))
    meta = save_graph(graph, tmp_path / "g")
    manifest = run_partition(graph, meta["hash"], 2, tmp_path / "p2")
    run_plan(graph, meta["hash"], partition_graph(graph, 2), manifest["partition_hash"], "hybrid",
             tmp_path / "p2hybrid")
    result = run_mpi(2, *train_args(tmp_path, 2, "hybrid", tmp_path / "m.jsonl", "--epochs", 3), timeout=120)
    assert result.returncode == 0, result.stderr
    _, epochs, summary = read_metrics(tmp_path / "m.jsonl")
    assert all(e["val_acc"] is None and e["test_acc"] is not None for e in epochs)
    assert summary["best_val_acc"] is None and summary["best_epoch"] is None
    assert summary["test_acc_at_best_val"] is None and summary["test_acc_at_min_val_loss"] is None
    assert summary["final"]["test_acc"] > 0
    assert "no validation nodes, so no best epoch" in result.stdout.splitlines()[-1]


def test_a_finished_run_says_what_it_reached_and_leaves_no_checkpoint_folders(workspace, tmp_path):
    """The last line rank 0 prints holds the run's figures, recomputed here from its epoch
    records; the checkpoint and the folders made for it are gone, the folder holding
    anything else is kept."""
    root, _ = workspace
    out = tmp_path / "m.jsonl"
    checkpoint = tmp_path / "checkpoints" / "P2" / "hybrid" / "seed0.pt"
    result = run_mpi(2, *train_args(root, 2, "hybrid", out, "--epochs", 4, "--checkpoint", checkpoint,
                                    "--checkpoint-every", 2, "--save-model", tmp_path / "model.pt"))
    assert result.returncode == 0, result.stderr
    _, epochs, _ = read_metrics(out)
    best = max(epochs, key=lambda e: (e["val_acc"], -e["epoch"]))
    mean = np.mean([e["seconds"]["max"]["total"] for e in epochs[1:]])
    assert result.stdout.splitlines()[-1] == (
        f"trained 4 epochs (mean epoch {mean:.4f} s, each process's first excluded): best val acc "
        f"{best['val_acc']:.4f} at epoch {best['epoch']}, test acc {best['test_acc']:.4f} there -> {out} "
        f"(and {tmp_path / 'model.pt'})")
    assert not (tmp_path / "checkpoints").exists() and out.exists()


def test_a_finished_run_is_never_trained_again_under_resume(workspace, tmp_path):
    """Its metrics are kept beside the checkpoint; deleted from --out (as Snakemake deletes
    an output it counts as incomplete), --resume puts the very file back without a rank
    training (under mpiexec and through the launcher alike); another epoch count trains."""
    import hashlib
    import subprocess
    import sys

    root, _ = workspace
    out, checkpoint = tmp_path / "m.jsonl", tmp_path / "ckpt" / "seed0.pt"
    args = train_args(root, 2, "hybrid", out, "--epochs", 3, "--checkpoint", checkpoint, "--checkpoint-every", 2)
    first = run_mpi(2, *args)
    assert first.returncode == 0, first.stderr
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    assert sorted(path.name for path in checkpoint.parent.iterdir()) == ["seed0.pt.finished.json",
                                                                          "seed0.pt.finished.jsonl"]
    out.unlink()
    again = run_mpi(2, *args, "--resume")
    assert again.returncode == 0, again.stderr
    assert "epoch 1:" not in again.stdout and f"already finished: {out} restored" in again.stdout
    assert hashlib.sha256(out.read_bytes()).hexdigest() == digest
    out.unlink()
    log = tmp_path / "launch.log"
    launched = subprocess.run([sys.executable, "-m", "supergcn.cli", *map(str, args), "--resume", "--launcher",
                               "false", "--log", str(log)], capture_output=True, text=True, timeout=120)  # no rank
    assert launched.returncode == 0, launched.stderr
    assert hashlib.sha256(out.read_bytes()).hexdigest() == digest and "already finished" in log.read_text()
    # Another epoch count is another run, trained from scratch: a finished run keeps no checkpoint.
    longer = run_mpi(2, *train_args(root, 2, "hybrid", out, "--epochs", 4, "--checkpoint", checkpoint, "--resume"))
    assert longer.returncode == 0 and "epoch 1:" in longer.stdout and len(read_metrics(out)[1]) == 4
