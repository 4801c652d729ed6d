"""BNS-GCN's boundary sampling (``--boundary-rate``): hand-worked values, the plain
exchange at p = 1, nothing sent at p = 0, bytes by the published formula, the layer-0
precompute against the exchanged aggregation, and what it refuses."""

from pathlib import Path

import numpy as np
import pytest

from supergcn.data.graph import load_graph
from supergcn.methods.bnsgcn.exchange import sampled_counts
from supergcn.plan.store import load_rank_plan
from supergcn.testing.plans import write_steps
from supergcn.train.metrics import read_metrics

from conftest import run_cli, run_mpi, run_rank_job

PARTS, HIDDEN = 3, 16


@pytest.fixture(scope="module")
def steps(tmp_path_factory):
    """synthetic-tiny in 3 parts with its post and hybrid plans."""
    return write_steps(tmp_path_factory.mktemp("bns"), "synthetic-tiny", PARTS, ("post", "hybrid"))


def train(steps, out, *extra, plan="post", epochs=4):
    result = run_mpi(PARTS, "train", "--graph", steps / "graph", "--partition", steps / "partition", "--plan",
                     steps / plan, "--out", out, "--hidden", HIDDEN, "--num-layers", 3, "--epochs", epochs, *extra)
    assert result.returncode == 0, result.stderr
    return read_metrics(out)[1]


def test_sampled_rows_are_the_hand_worked_ones_and_p_1_is_the_plain_exchange():
    run_rank_job(Path(__file__).with_name("bnsgcn_job.py"), 2, timeout=300)


def test_sampled_counts_floor_the_share_as_published():
    assert sampled_counts(0.1, np.array([0, 9, 10, 29, 30])).tolist() == [0, 0, 1, 2, 3]
    assert sampled_counts(1.0, np.array([7, 0])).tolist() == [7, 0]
    assert sampled_counts(0.0, np.array([7, 3])).tolist() == [0, 0]


@pytest.mark.parametrize("rate, precompute", [(0.1, "auto"), (0.35, "off")])
def test_bytes_per_epoch_are_the_published_formula(steps, tmp_path, rate, precompute):
    """ids once per epoch (int64) + k rows of each exchanging layer's input width, forward and back
    (layer 0's features forward only);
    with the precompute (BNS-GCN's --use-pp, on by default) layer 0 exchanges every row
    once, in epoch 1, and nothing after."""
    epochs = train(steps, tmp_path / "m.jsonl", "--boundary-rate", rate, "--precompute-input", precompute)
    graph = load_graph(steps / "graph")
    features = graph.features.shape[1]
    plans = [load_rank_plan(steps / "post", rank) for rank in range(PARTS)]
    sampled = sum(int(rate * int(n)) for plan in plans for n in plan.send_counts)
    all_rows = sum(int(plan.send_counts.sum()) for plan in plans)
    # BNS-GCN's layers aggregate first, as its code's: each exchanges its input's width, and
    # layer 0 the features forward only (nothing needs their gradient), unless precomputed.
    per_epoch = 8 * sampled + sum(2 * sampled * width * 4 for width in (HIDDEN, HIDDEN))
    if precompute == "off":
        per_epoch += sampled * features * 4
    for epoch in epochs:
        precomputed = all_rows * features * 4 if precompute == "auto" and epoch["epoch"] == 1 else 0
        assert epoch["bytes"]["sent_total"] == per_epoch + precomputed, epoch["epoch"]
        assert epoch["bytes"]["ids_sent_total"] == 8 * sampled


def test_p_0_sends_nothing(steps, tmp_path):
    epochs = train(steps, tmp_path / "m.jsonl", "--boundary-rate", 0, "--precompute-input", "off")
    assert all(epoch["bytes"]["sent_total"] == 0 for epoch in epochs)


def test_p_1_with_the_precompute_is_post_up_to_rounding(steps, tmp_path):
    """(A X) W against A (X W): the same losses and logits within float32 rounding."""
    plain = train(steps, tmp_path / "post.jsonl", "--save-logits", tmp_path / "post.npy")
    precomputed = train(steps, tmp_path / "pp.jsonl", "--boundary-rate", 1, "--precompute-input", "on",
                        "--save-logits", tmp_path / "pp.npy")
    np.testing.assert_allclose([e["loss"] for e in precomputed], [e["loss"] for e in plain], rtol=1e-5)
    np.testing.assert_allclose(np.load(tmp_path / "pp.npy"), np.load(tmp_path / "post.npy"), rtol=1e-5, atol=1e-5)


def test_sampling_partial_aggregates_trains_too(steps, tmp_path):
    """A hybrid plan's PRE rows drawn the same way (unbiased too: module docstring)."""
    epochs = train(steps, tmp_path / "m.jsonl", "--boundary-rate", 0.5, plan="hybrid")
    assert all(np.isfinite(e["loss"]) for e in epochs) and epochs[-1]["loss"] < epochs[0]["loss"]


@pytest.mark.parametrize("extra, words", [
    (["--bits", 2], "--bits 32"), (["--model", "gat"], "--model sage or gcn or gin"),
    (["--schedule", "pipe"], "--schedule sync"),
    (["--precompute-input", "on", "--label-rate", 0.5], "--precompute-input off")])
def test_what_it_cannot_run_with_is_refused(steps, tmp_path, extra, words):
    out = tmp_path / "m.jsonl"
    result = run_cli("train", "--graph", steps / "graph", "--partition", steps / "partition", "--plan",
                     steps / "post", "--out", out, "--boundary-rate", 0.1, *extra)
    assert result.returncode == 2 and words in result.stderr, result.stderr
    assert not out.exists()
