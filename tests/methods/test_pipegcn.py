"""PipeGCN's stale exchange (``--schedule pipe|pipe-f|pipe-g|pipe-fg``): hand-worked values
(epoch t sees epoch t - 1's rows and gradients, zeros at the first) beside DistGNN's cd-1,
the synchronous exchange's bytes, the same model on every strategy, and what it refuses."""

from pathlib import Path

import numpy as np
import pytest

from supergcn.testing.plans import write_steps
from supergcn.train.metrics import read_metrics

from conftest import run_cli, run_mpi, run_rank_job

PARTS = 3


@pytest.fixture(scope="module")
def steps(tmp_path_factory):
    """synthetic-tiny in 3 parts with its post and hybrid plans."""
    return write_steps(tmp_path_factory.mktemp("pipe"), "synthetic-tiny", PARTS, ("post", "hybrid"))


def train(steps, out, *extra, plan="post"):
    result = run_mpi(PARTS, "train", "--graph", steps / "graph", "--partition", steps / "partition", "--plan",
                     steps / plan, "--out", out, "--hidden", 16, "--num-layers", 3, "--epochs", 4, *extra)
    assert result.returncode == 0, result.stderr
    return read_metrics(out)[1]


@pytest.mark.parametrize("schedule", ["pipe", "pipe-fg"])
def test_epoch_t_uses_epoch_t_minus_1s_rows_and_gradients(schedule):
    run_rank_job(Path(__file__).with_name("pipegcn_job.py"), 2, args=[schedule])


@pytest.mark.parametrize("precompute", ["on", "off"])
def test_it_sends_the_synchronous_exchanges_bytes(steps, tmp_path, precompute):
    """Every epoch the bytes of post with the same layer order (PipeGCN's layers aggregate
    first) and the same layer-0 precompute."""
    stale = train(steps, tmp_path / "pipe.jsonl", "--schedule", "pipe", "--precompute-input", precompute)
    synchronous = train(steps, tmp_path / "sync.jsonl", "--aggregate-first", "--precompute-input", precompute)
    assert [e["bytes"] for e in stale] == [e["bytes"] for e in synchronous]


def test_every_strategy_trains_the_same_model(steps, tmp_path):
    """R B_{t-1} = A_remote X_{t-1} whether B holds partial sums or source rows."""
    post = train(steps, tmp_path / "post.jsonl", "--schedule", "pipe-g")
    hybrid = train(steps, tmp_path / "hybrid.jsonl", "--schedule", "pipe-g", plan="hybrid")
    np.testing.assert_allclose([e["loss"] for e in hybrid], [e["loss"] for e in post], rtol=1e-5)


@pytest.mark.parametrize("extra, words", [
    (["--bits", 2], "--bits 32"), (["--model", "gat"], "--model sage|gcn|gin")])
def test_what_it_cannot_run_with_is_refused(steps, tmp_path, extra, words):
    out = tmp_path / "m.jsonl"
    result = run_cli("train", "--graph", steps / "graph", "--partition", steps / "partition", "--plan",
                     steps / "post", "--out", out, "--schedule", "pipe", *extra)
    assert result.returncode == 2 and words in result.stderr, result.stderr
    assert not out.exists()
