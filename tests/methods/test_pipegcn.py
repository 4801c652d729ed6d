"""PipeGCN's stale exchange (``--schedule pipe|pipe-f|pipe-g|pipe-fg``): hand-worked values
(epoch t sees epoch t - 1's rows and gradients, zeros at the first) beside DistGNN's cd-1,
the synchronous exchange's bytes, the same model on every strategy, and what it refuses."""

from pathlib import Path

import numpy as np
import pytest

from supergcn.data.graph import load_graph
from supergcn.plan.store import load_rank_plan
from supergcn.testing.plans import write_steps
from supergcn.train.metrics import read_metrics

from conftest import run_cli, run_mpi, run_rank_job

PARTS, HIDDEN = 3, 16


@pytest.fixture(scope="module")
def steps(tmp_path_factory):
    """synthetic-tiny in 3 parts with its post and hybrid plans."""
    return write_steps(tmp_path_factory.mktemp("pipe"), "synthetic-tiny", PARTS, ("post", "hybrid"))


def train(steps, out, *extra, plan="post"):
    result = run_mpi(PARTS, "train", "--graph", steps / "graph", "--partition", steps / "partition", "--plan",
                     steps / plan, "--out", out, "--hidden", HIDDEN, "--num-layers", 3, "--epochs", 4, *extra)
    assert result.returncode == 0, result.stderr
    return read_metrics(out)[1]


@pytest.fixture(scope="module")
def pipe_g_post(steps, tmp_path_factory):
    """PipeGCN-G's epochs on the post plan, with the layer-0 precompute (``auto`` turns it on
    for PipeGCN): the bytes test and the strategy test read the one run."""
    return train(steps, tmp_path_factory.mktemp("pipe-g") / "post.jsonl", "--schedule", "pipe-g")


def test_epoch_t_uses_epoch_t_minus_1s_rows_and_gradients():
    run_rank_job(Path(__file__).with_name("pipegcn_job.py"), 2, args=["pipe", "pipe-fg"])


def test_it_sends_the_synchronous_exchanges_bytes(steps, pipe_g_post, tmp_path):
    """Every epoch, each rank sends what the synchronous post exchange sends with the same
    layer order (PipeGCN's layers aggregate first): at each layer its send rows at the
    layer's input width, F features then the hidden 16 and 16, and back the gradients of the
    rows it received at each width but the features' (they need none), 4 B a value. With
    the layer-0 precompute the features' rows go once, in epoch 1, and not in any pass."""
    features = load_graph(steps / "graph").features.shape[1]
    plans = [load_rank_plan(steps / "post", rank) for rank in range(PARTS)]
    sends, receives = [int(p.send_counts.sum()) for p in plans], [int(p.recv_counts.sum()) for p in plans]

    def per_rank(forward, backward, first_epoch):
        """(sent, received) per rank of an epoch, the precompute's ``first_epoch`` features included."""
        widths = [*forward, *([features] if first_epoch else [])]
        return ([4 * (sum(widths) * out + sum(backward) * back) for out, back in zip(sends, receives)],
                [4 * (sum(widths) * back + sum(backward) * out) for out, back in zip(sends, receives)])

    without = train(steps, tmp_path / "pipe.jsonl", "--schedule", "pipe", "--precompute-input", "off")
    for epochs, forward, precomputed in ((pipe_g_post, [HIDDEN, HIDDEN], True),
                                         (without, [features, HIDDEN, HIDDEN], False)):
        for epoch in epochs:
            sent, received = per_rank(forward, [HIDDEN, HIDDEN], precomputed and epoch["epoch"] == 1)
            assert epoch["bytes"]["sent_per_rank"] == sent and epoch["bytes"]["received_per_rank"] == received
            assert epoch["bytes"]["sent_total"] == epoch["bytes"]["data_sent_total"] == sum(sent)


def test_every_strategy_trains_the_same_model(steps, pipe_g_post, tmp_path):
    """R B_{t-1} = A_remote X_{t-1} whether B holds partial sums or source rows."""
    hybrid = train(steps, tmp_path / "hybrid.jsonl", "--schedule", "pipe-g", plan="hybrid")
    np.testing.assert_allclose([e["loss"] for e in hybrid], [e["loss"] for e in pipe_g_post], rtol=1e-5)


@pytest.mark.parametrize("extra, words", [
    (["--bits", 2], "--bits 32"), (["--model", "gat"], "--model sage or gcn or gin")])
def test_what_it_cannot_run_with_is_refused(steps, tmp_path, extra, words):
    out = tmp_path / "m.jsonl"
    result = run_cli("train", "--graph", steps / "graph", "--partition", steps / "partition", "--plan",
                     steps / "post", "--out", out, "--schedule", "pipe", *extra)
    assert result.returncode == 2 and words in result.stderr, result.stderr
    assert not out.exists()
