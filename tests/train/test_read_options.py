"""No option silently unused: what a run declares it reads (each option's ``read_when``,
derived from the models' and the methods' cards) is what its training code reads, in a real
run of SuperGCN's exchange and of every compared method; and an option given to a run that
does not read it is refused, whatever the option and the method."""

import json
from pathlib import Path

import pytest

from supergcn.methods import METHODS, card
from supergcn.testing.plans import write_steps
from supergcn.train.config import TrainConfig, default, option_read
from supergcn.train.conflicts import unread_options

from conftest import run_cli, run_rank_job

#: Options no training code reads: the paths, checked as the run starts; the memory a rank
#: may use, checked by the launcher before any rank starts (tests/cli/test_replicated_memory.py);
#: the fault injection of the abort path's tests.
NOT_TRAINING = {"memory_per_rank", "fail_at_epoch", "fail_rank"}


@pytest.fixture(scope="module")
def read_by_runs(tmp_path_factory) -> dict:
    steps = write_steps(tmp_path_factory.mktemp("steps"), "synthetic-tiny", 2, ("pre", "post", "hybrid"))
    out = tmp_path_factory.mktemp("runs")
    output = run_rank_job(Path(__file__).with_name("read_options_job.py"), 2, args=[steps, out], timeout=400)
    read = json.loads((out / "read.json").read_text())
    firsts = [line for line in output.splitlines() if line.startswith("training ")]
    return {**read, "lines": dict(zip(read, firsts))}


def scenario_values(name: str) -> dict:
    values = {field: default(field) for field in TrainConfig.__dataclass_fields__}
    values.update(epochs=2, hidden=8, grad_clip=1.0)
    if name == "supergcn-int2-lp":
        values.update(bits=2, label_rate=0.5, label_draw="bernoulli", rounding="stochastic")
    elif name == "supergcn-gat":
        values.update(model="gat", heads=2, attention_dropout=0.1)
    elif name in METHODS:
        values.update(card(name).example)
    return values


@pytest.mark.parametrize("scenario", ["supergcn", "supergcn-int2-lp", "supergcn-gat", *METHODS])
def test_every_option_a_run_declares_read_is_read_by_its_training(read_by_runs, scenario):
    """(A run of a tiny graph at P = 2, each of the job's scenarios.)"""
    values = scenario_values(scenario)
    declared = {name for name in TrainConfig.__dataclass_fields__
                if option_read(name, values) and name not in NOT_TRAINING}
    # The methods' selecting options are read in choosing the run's method (supergcn.methods.method_of).
    declared -= {card(name).option for name in METHODS}
    assert sorted(declared - set(read_by_runs[scenario])) == []


@pytest.mark.parametrize("scenario", ["supergcn", "supergcn-gat", *METHODS])
def test_an_option_given_where_it_is_not_read_is_refused(scenario):
    """Every option, given at its default to a run of each method that does not read it, is
    refused; set otherwise, it is among the run's conflicts."""
    values = scenario_values(scenario)
    paths = {name: "x" for name in ("graph", "partition", "plan", "out")}
    settings = TrainConfig(**{**values, **paths})
    selectors = {card(name).option for name in METHODS}
    for name in TrainConfig.__dataclass_fields__:
        if option_read(name, values) or name in selectors:
            continue
        (message,) = unread_options({name: default(name)}, settings)
        assert message.startswith(f"--{name.replace('_', '-')} ") and "is not read by this run" in message


@pytest.mark.parametrize("given, words", [
    (["--fanouts", "5,10,15"], "--fanouts 5,10,15 is not read by this run (only by DistGNN-MB's runs (--batch-size))"),
    (["--heads", "8"], "--heads 8 is not read by this run (only by --model gat)"),
    (["--schedule", "pipe", "--pipe-momentum", "0.95"], "--pipe-momentum 0.95 is not read by this run"),
    (["--rounding", "stochastic"], "(only by --bits 8, 4, 2 or a method's widths)"),
    # bfloat16 rows are rounded to nearest even and carry no parameters.
    (["--bits", "16", "--parameter-dtype", "float32"], "--parameter-dtype float32 is not read by this run")])
def test_the_command_line_refuses_what_its_run_does_not_read(tmp_path, given, words):
    """Given at its default or not, an option the run does not read is refused before any
    rank starts, with what would read it."""
    result = run_cli("train", "--graph", tmp_path / "g", "--partition", tmp_path / "p", "--plan", tmp_path / "q",
                     "--out", tmp_path / "m.jsonl", *given)
    assert result.returncode == 2 and words in result.stderr, result.stderr
    assert result.stderr.count("error:") == 1 and not (tmp_path / "m.jsonl").exists()


def test_a_run_starts_with_a_line_that_names_its_method(read_by_runs):
    """The first line of each run names what it trains as its paper does."""
    lines = read_by_runs["lines"]
    assert lines["supergcn"] == "training SuperGCN: GraphSAGE, hybrid plan, fp32 exchange, no label propagation, P = 2"
    assert lines["supergcn-int2-lp"] == ("training SuperGCN: GraphSAGE, hybrid plan, int2 exchange, label "
                                         "propagation, P = 2")
    assert lines["distgnn"] == ("training DistGNN (cd-5): GraphSAGE, pre plan, fp32 exchange, no label "
                                "propagation, P = 2")
    assert lines["pipegcn"].startswith("training PipeGCN-F: GraphSAGE, hybrid plan")
    assert lines["bnsgcn"].startswith("training BNS-GCN (p = 0.1): GraphSAGE, hybrid plan")
    assert lines["mixgcn"].startswith("training MixGCN: GraphSAGE, hybrid plan")
    assert lines["adaqp"].startswith("training AdaQP: GraphSAGE, hybrid plan, adaptive exchange")
    assert lines["distgnn_mb"].startswith("training DistGNN-MB (fan2_2_2): GraphSAGE, hybrid plan")
