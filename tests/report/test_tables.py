"""Result tables from metrics files written the way a training run writes them."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from supergcn.distributed.timing import DETAIL, PhaseTimer
from supergcn.errors import SuperGCNError
from supergcn.report import step_tables
from supergcn.report.step_tables import preprocessing_table, volume_table
from supergcn.report.table_files import write_table
from supergcn.report.tables import (
    accuracy_table,
    breakdown_table,
    run_record,
    runs_table,
    scaling_caption,
    scaling_table,
    time_to_accuracy_table,
)
from supergcn.train.metrics import METRICS_FORMAT, read_metrics, summary_record, write_metrics

from conftest import run_mpi


def run_header(num_ranks, **config):
    """A header with the fields the tables read, a float32 GraphSAGE run without label
    propagation unless ``config`` says otherwise."""
    return {"type": "header", "format": METRICS_FORMAT, "dataset": "g", "num_ranks": num_ranks,
            "strategy": "hybrid", "threads_per_rank": 1,
            "config": {"bits": 32, "label_rate": 0.0, "seed": 0, "schedule": "sync", "model": "sage", **config}}


def write_run(path, num_ranks, epoch_phases, peaks, best=None, header=(), minibatch=None, **config):
    """A metrics file of three epochs, each with the slowest rank's phases ``epoch_phases``
    (and ``minibatch[e]``, a mini-batch epoch's record), with :func:`run_header`'s header (its
    ``config`` updated by ``config``) updated by ``header``."""
    timer = PhaseTimer()
    timer.seconds.update(epoch_phases)
    seconds = timer.breakdown(sum(epoch_phases.values()) + 0.5)  # 0.5 s remainder
    records = [{"type": "epoch", "epoch": e, "seconds": {"max": seconds, "slowest_rank": seconds},
                "bytes": {"sent_total": 100}, "val_acc": 0.5, "test_acc": 0.4} for e in (1, 2, 3)]
    for record, epoch in zip(records, minibatch or ()):
        record["minibatch"] = epoch
    header = {**run_header(num_ranks, **config), **dict(header)}
    best = best or {"val_acc": 0.5, "epoch": 2, "test_acc": 0.4}
    write_metrics(path, header, records, summary_record(records, best, {"test_acc": 0.4}, ["h"] * num_ranks, peaks))
    return path


def test_breakdown_splits_other_and_scaling_reports_peak_memory(tmp_path):
    phases = {"aggregation": 1.0, "communication": 0.5, "dense": 2.0, "elementwise": 0.25, "optimizer": 0.125}
    runs = runs_table([write_run(tmp_path / "p1.jsonl", 1, phases, [3 * 2**30]),
                       write_run(tmp_path / "p2.jsonl", 2, {k: v / 2 for k, v in phases.items()},
                                 [2**30, 2 * 2**30])])
    breakdown = breakdown_table(runs).set_index("P")
    # The paper's "other" is a subtotal of the four columns before it, and named one.
    assert breakdown.loc[1, "other_subtotal_seconds"] == pytest.approx(2.0 + 0.25 + 0.125 + 0.5)
    columns = list(breakdown.columns)
    assert columns.index("other_subtotal_seconds") == columns.index("remainder_seconds") + 1
    assert breakdown.loc[1, "remainder_seconds"] == pytest.approx(0.5)
    parts = breakdown[[f"{phase}_seconds" for phase in DETAIL]].sum(axis=1)
    np.testing.assert_allclose(parts, breakdown["epoch_seconds"])
    scaling = scaling_table(runs).set_index("P")
    assert scaling.loc[1, "peak_memory_gib"] == 3.0 and scaling.loc[2, "peak_memory_gib"] == 2.0
    assert scaling.loc[2, "speedup"] == pytest.approx(4.375 / 2.4375)


def test_accuracy_reports_both_model_selections(tmp_path):
    phases = {"dense": 1.0}
    runs = runs_table([
        write_run(tmp_path / f"s{seed}.jsonl", 2, phases, [1], best={
            "val_acc": 0.5, "epoch": 2, "test_acc": acc, "val_loss": 0.9, "val_loss_epoch": 3,
            "test_acc_at_val_loss": at_loss}) for seed, (acc, at_loss) in enumerate([(0.4, 0.5), (0.6, 0.7)])]
        # A run without validation nodes: the trainer's "no best epoch".
        + [write_run(tmp_path / "noval.jsonl", 4, phases, [1], best={"val_acc": None, "epoch": None,
                                                                       "test_acc": None})])
    table = accuracy_table(runs).set_index("P")
    assert table.loc[2, "test_acc"] == "50.00 ± 14.14" and table.loc[2, "val_loss_test_acc"] == "60.00 ± 14.14"
    assert table.loc[2, "seeds"] == 2 and np.isnan(table.loc[4, "val_loss_test_acc_mean"])
    assert table.loc[4, "test_acc"] == "n/a" and table.loc[4, "val_loss_test_acc"] == "n/a"
    assert table.loc[4, "seeds"] == 1


def test_scaling_names_the_papers_variants_and_shows_speedup_over_a_baseline(tmp_path):
    def run(name, parts, dense):
        path = write_run(tmp_path / f"{name}{parts}.jsonl", parts, {"dense": dense}, [1])
        strategy, bits, lp = {"slow": ("post", 32, 0.0), "fast": ("hybrid", 2, 0.62)}[name]
        lines = path.read_text().splitlines()
        header = json.loads(lines[0])
        header["strategy"], header["config"]["bits"], header["config"]["label_rate"] = strategy, bits, lp
        path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
        return path

    def distgnn(parts):
        path = write_run(tmp_path / f"cd5-{parts}.jsonl", parts, {"dense": 1.0}, [1])
        lines = path.read_text().splitlines()
        header = json.loads(lines[0])
        header["strategy"], header["config"]["schedule"] = "pre", "cd-5"
        path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
        return path

    runs = runs_table([run("slow", 2, 3.5), run("fast", 2, 1.5), run("slow", 4, 1.5), distgnn(2)])
    table = scaling_table(runs, baseline="post-fp32-nolp").set_index(["variant", "P"])
    assert table.loc[("pre-fp32-nolp-cd-5", 2), "name"] == "DistGNN (cd-5)"
    assert table.loc[("pre-fp32-nolp-cd-5", 2), "bytes_sent_per_epoch"] == 100
    assert table.loc[("hybrid-int2-lp", 2), "name"] == "SuperGCN w/ comm optimizations"
    assert table.loc[("post-fp32-nolp", 2), "name"] == "SuperGCN w/o comm optimizations"
    # Epochs are the phases plus 0.5 s of remainder: (3.5 + 0.5) / (1.5 + 0.5).
    assert table.loc[("hybrid-int2-lp", 2), "speedup_vs_post-fp32-nolp"] == pytest.approx(2.0)
    assert table.loc[("post-fp32-nolp", 4), "speedup_vs_post-fp32-nolp"] == pytest.approx(1.0)
    choices = "hybrid-int2-lp, post-fp32-nolp, pre-fp32-nolp-cd-5"
    with pytest.raises(SuperGCNError, match=f"not a variant of this study — choose one of {choices}"):
        scaling_table(runs, baseline="pre-fp32-nolp")


def test_adaqp_runs_are_named_as_published_only_where_their_options_round_stochastically(tmp_path):
    """The variant's name says adaptive bits; the runs' options say how they rounded: auto
    (AdaQP's, stochastic) and stochastic runs are "AdaQP", nearest ones their label, in
    every table, and a variant whose runs disagree goes by its label."""
    def adaqp(rounding, seed, parts=2):
        return write_run(tmp_path / f"{rounding}-{seed}-{parts}.jsonl", parts, {"dense": 1.0}, [1], bits="adaptive",
                         rounding=rounding, seed=seed)

    for roundings, expected in ((("auto", "stochastic"), "AdaQP"), (("nearest", "nearest"), "hybrid-adaptive-nolp"),
                                (("auto", "nearest"), "hybrid-adaptive-nolp")):
        runs = runs_table([adaqp(rounding, seed) for seed, rounding in enumerate(roundings)])
        assert [display for display in runs["name"]] == [
            "AdaQP" if rounding != "nearest" else "hybrid-adaptive-nolp" for rounding in roundings]
        for table in (scaling_table(runs), breakdown_table(runs), accuracy_table(runs)):
            assert set(table["name"]) == {expected}


def test_speedup_is_against_p1_or_says_which_p_and_oversubscribed_runs_are_marked(tmp_path):
    """hybrid-fp32-nolp has a P = 1 run (4 s), post-fp32-nolp starts at P = 2 (3 s); epochs
    are the dense seconds plus 0.5 s of remainder. The P = 4 runs shared cores; one P = 2
    seed's metrics file predates the record."""
    def run(name, parts, dense, oversubscribed, seed=0):
        header = {} if oversubscribed == "unknown" else {"oversubscribed": oversubscribed}
        strategy = {"hybrid": {}, "post": {"strategy": "post"}}[name]
        return write_run(tmp_path / f"{name}{parts}-{seed}.jsonl", parts, {"dense": dense}, [1],
                         header={**header, **strategy}, seed=seed)

    runs = runs_table([run("hybrid", 1, 3.5, False), run("hybrid", 2, 2.0, False),
                       run("hybrid", 2, 2.0, "unknown", seed=1), run("hybrid", 4, 1.1, True),
                       run("post", 2, 2.5, False), run("post", 4, 1.5, True)])
    assert runs["oversubscribed"].tolist() == [False, False, None, True, False, True]
    table = scaling_table(runs).set_index(["variant", "P"])
    hybrid, post = "hybrid-fp32-nolp", "post-fp32-nolp"
    expected = {(hybrid, 1): (1, 1.0, 1.0, False), (hybrid, 2): (1, 4 / 2.5, 0.8, None),
                (hybrid, 4): (1, 4 / 1.6, 0.625, True),
                (post, 2): (2, 1.0, 1.0, False), (post, 4): (2, 1.5, 0.75, True)}
    for key, (base, speedup, efficiency, oversubscribed) in expected.items():
        row = table.loc[key]
        assert row["speedup_base_P"] == base and row["oversubscribed"] is oversubscribed, key
        assert row["speedup"] == pytest.approx(speedup) and row["efficiency"] == pytest.approx(efficiency), key
    caption = scaling_caption(table.reset_index())
    assert "Without a P = 1 run, post-fp32-nolp (P = 2): speed-up and efficiency relative to that P" in caption
    assert "hybrid-fp32-nolp (P = 1)" not in caption
    assert "Rows marked oversubscribed (P = 4)" in caption and "predate that record" in caption
    known = scaling_table(runs[runs["seed"] == 0])
    assert "predate" not in scaling_caption(known) and known["oversubscribed"].tolist() == [
        False, False, True, False, True]


def test_int2_reduction_counts_the_parameters_that_travel_with_the_data(monkeypatch):
    """A hand-made hybrid plan of 8 rows from rank 0 to 1 and 4 back: FP32 sends 12 rows of
    4F bytes, Int2 3 byte columns of F (4 rows a byte, no padding) and 4 B of bfloat16 zero
    point and scale per row, so hybrid / Int2 = 16F / (F + 16), the published ratio with the
    parameters (15.06 at F = 256, 12.8 at F = 64), not the 16 of the data alone."""
    rows = {"pre": np.array([[0, 10], [6, 0]]), "post": np.array([[0, 8], [9, 0]]),
            "hybrid": np.array([[0, 8], [4, 0]])}
    monkeypatch.setattr(step_tables, "plan_strategy_rows",
                        lambda directory: ({"num_ranks": 2, "strategy": "hybrid"}, rows))
    table = volume_table([("wide", "plan"), ("narrow", "plan")], {"wide": 256, "narrow": 64}).set_index("dataset")
    for dataset, width in (("wide", 256), ("narrow", 64)):
        row = table.loc[dataset]
        assert (row["pre_bytes"], row["post_bytes"], row["hybrid_bytes"]) == (16 * 4 * width, 17 * 4 * width,
                                                                              12 * 4 * width)
        assert (row["hybrid_int2_data_bytes"], row["hybrid_int2_param_bytes"]) == (3 * width, 12 * 4)
        assert row["hybrid_int2_bytes"] == 3 * width + 48
        assert row["hybrid_reduction"] == pytest.approx(16 / 12)
        assert row["int2_reduction"] == pytest.approx(16 * width / (width + 16))
    assert table.loc["wide", "int2_reduction"] == pytest.approx(15.0588, abs=1e-4)


def write_curve(path, label_rate, seed, seconds, val, test, num_ranks=2):
    """A metrics file of Int2 runs at ``num_ranks`` with these per-epoch times and accuracies,
    the last epoch's test accuracy its final one."""
    records = [{"type": "epoch", "epoch": e, "bytes": {"sent_total": 0}, "val_acc": v, "test_acc": a,
                "seconds": {"max": {"total": t}, "slowest_rank": PhaseTimer().breakdown(t)}}
               for e, (t, v, a) in enumerate(zip(seconds, val, test), start=1)]
    header = run_header(num_ranks, bits=2, label_rate=label_rate, seed=seed)
    best = {"val_acc": max(val), "epoch": 1, "test_acc": 0.5}
    write_metrics(path, header, records, summary_record(records, best, {"test_acc": test[-1]}, ["h"] * num_ranks,
                                                        [1] * num_ranks))
    return path


def test_scaling_times_carry_their_spread_over_seeds_and_epochs(tmp_path):
    """Two seeds at P = 1 and P = 2: the spread is the standard deviation of every timed
    epoch of both runs together (each run's first epoch left out), the speed-up's is carried
    from both to first order, and Markdown shows each figure to its spread's second digit."""
    times = {(1, 0): [9, 4.0, 4.2, 3.9], (1, 1): [9, 4.4, 4.1, 4.3], (2, 0): [9, 2.1, 2.3, 2.2],
             (2, 1): [9, 2.6, 2.4, 2.5]}
    runs = runs_table([write_curve(tmp_path / f"p{parts}s{seed}.jsonl", 0.0, seed, seconds, [0.5] * 4, [0.5] * 4,
                                   num_ranks=parts) for (parts, seed), seconds in times.items()])
    assert runs["timed_epochs"].tolist() == [3] * 4
    assert runs["epoch_seconds_sd"].iloc[0] == pytest.approx(np.std([4.0, 4.2, 3.9], ddof=1))
    table = scaling_table(runs).set_index("P")
    pooled = {P: np.std(times[P, 0][1:] + times[P, 1][1:], ddof=1) for P in (1, 2)}
    means = {P: np.mean(times[P, 0][1:] + times[P, 1][1:]) for P in (1, 2)}
    assert table.loc[1, "epoch_seconds_sd"] == pytest.approx(pooled[1])
    assert table.loc[2, "epoch_seconds_sd"] == pytest.approx(pooled[2]) and table.loc[2, "runs"] == 2
    speedup = means[1] / means[2]
    assert table.loc[2, "speedup"] == pytest.approx(speedup)
    assert table.loc[2, "speedup_sd"] == pytest.approx(
        speedup * math.hypot(pooled[1] / means[1], pooled[2] / means[2]))
    assert table.loc[1, "speedup_sd"] == 0.0 and table.loc[2, "efficiency_sd"] == pytest.approx(
        table.loc[2, "speedup_sd"] / 2)
    write_table(table.reset_index(), tmp_path / "scaling", "Caption.")
    shown = pd.read_csv(tmp_path / "scaling.md", sep="|", skiprows=[0, 1, 3], skipinitialspace=True, dtype=str)
    shown.columns = [column.strip() for column in shown.columns]
    row = shown[shown["P"].str.strip() == "2"].iloc[0]
    # 2.35 s with a spread of 0.19 s: two decimals; the speed-up 1.77 ± 0.16 likewise.
    assert (row["epoch_seconds"].strip(), row["epoch_seconds_sd"].strip()) == (f"{means[2]:.2f}", f"{pooled[2]:.2f}")
    assert row["speedup"].strip() == f"{speedup:.2f}" and len(row["speedup_sd"].strip()) == 4


def test_a_base_run_without_a_spread_leaves_the_speed_ups_spread_empty(tmp_path):
    """P = 1 timed one epoch (no sd): the speed-ups at P = 2 and 4 have no spread either,
    not one carried from P = 2's sd as if it were the base's."""
    times = {1: [9, 4.0], 2: [9, 2.1, 2.5, 2.3], 4: [9, 1.2, 1.2, 1.2]}
    runs = runs_table([write_curve(tmp_path / f"p{parts}.jsonl", 0.0, 0, seconds, [0.5] * len(seconds),
                                   [0.5] * len(seconds), num_ranks=parts) for parts, seconds in times.items()])
    table = scaling_table(runs).set_index("P")
    assert pd.isna(table.loc[1, "epoch_seconds_sd"]) and table.loc[2, "epoch_seconds_sd"] > 0
    assert table.loc[4, "speedup"] == pytest.approx(4.0 / 1.2)
    assert pd.isna(table.loc[2, "speedup_sd"]) and pd.isna(table.loc[4, "speedup_sd"])
    assert table.loc[1, "speedup_sd"] == 0.0


def test_time_to_accuracy_gives_the_first_epoch_and_the_seconds_summed_until_then(tmp_path):
    runs = runs_table([
        write_curve(tmp_path / "a0.jsonl", 0.0, 0, [2, 1, 1, 1], [0.5, 0.8, 0.9, 0.85], [0.4, 0.7, 0.88, 0.9]),
        write_curve(tmp_path / "a1.jsonl", 0.0, 1, [2, 1, 1, 1], [0.6, 0.7, 0.75, 0.8], [0.5, 0.6, 0.7, 0.7]),
        write_curve(tmp_path / "b0.jsonl", 0.62, 0, [3, 2, 2, 2], [0.85, 0.9, 0.95, 0.93], [0.8, 0.85, 0.9, 0.9]),
    ])
    table = time_to_accuracy_table(runs, absolute=[80], relative=[0.95]).set_index(["variant", "split", "target"])
    no_lp, lp = "hybrid-int2-nolp", "hybrid-int2-lp"
    # 80 %: epochs 2 (2 + 1 s) and 4 (2 + 1 + 1 + 1 s) without LP; epoch 1 (3 s) with it.
    row = table.loc[(no_lp, "val", "80 %")]
    assert (row["reached"], row["epoch_mean"], row["seconds_mean"]) == ("2/2", 3.0, 4.0)
    assert row["seconds_std"] == pytest.approx(np.std([3, 5], ddof=1))
    row = table.loc[(lp, "val", "80 %")]
    assert (row["reached"], row["epoch_mean"], row["seconds_mean"], row["seconds_std"]) == ("1/1", 1.0, 3.0, 0.0)
    # 0.95 x the best validation accuracy of the dataset (0.95, run b0) = 90.25 %: 0.9 falls short.
    row = table.loc[(no_lp, "val", "0.95 x best")]
    assert row["target_acc"] == pytest.approx(90.25) and row["reached"] == "0/2" and np.isnan(row["seconds_mean"])
    row = table.loc[(lp, "val", "0.95 x best")]
    assert (row["reached"], row["epoch_mean"], row["seconds_mean"]) == ("1/1", 3.0, 7.0)
    # Test targets follow the test accuracies (best 0.9): 0.855 first at epoch 3 of a0 and b0.
    assert table.loc[(no_lp, "test", "0.95 x best"), "reached"] == "1/2"
    assert table.loc[(lp, "test", "0.95 x best"), "seconds_mean"] == 7.0
    assert table.loc[(lp, "test", "0.95 x best"), "name"] == "SuperGCN w/ comm optimizations"


def test_time_to_accuracy_gives_distgnn_mbs_convergence_within_a_point_of_the_p1_runs(tmp_path):
    """DistGNN-MB's §4.5 at every P: the first epoch whose test accuracy is at least the mean
    final test accuracy of the variant's P = 1 runs (0.80 and 0.70 here: 0.75) less 1 point,
    0.74; a variant without P = 1 runs has no such target."""
    val = [0.5, 0.6, 0.7, 0.8]
    runs = runs_table([
        write_curve(tmp_path / "p1s0.jsonl", 0.0, 0, [2, 2, 2, 2], val, [0.5, 0.745, 0.79, 0.80], num_ranks=1),
        write_curve(tmp_path / "p1s1.jsonl", 0.0, 1, [2, 2, 2, 2], val, [0.5, 0.6, 0.65, 0.70], num_ranks=1),
        write_curve(tmp_path / "p4.jsonl", 0.0, 0, [1, 1, 1, 1], val, [0.5, 0.735, 0.741, 0.73], num_ranks=4),
        write_curve(tmp_path / "lp.jsonl", 0.62, 0, [1, 1, 1, 1], val, [0.9, 0.9, 0.9, 0.9], num_ranks=4),
    ])
    table = time_to_accuracy_table(runs, relative=[0.95]).set_index(["variant", "P", "split", "target"])
    target = "P = 1 final - 1 pt"
    one, four = table.loc[("hybrid-int2-nolp", 1, "test", target)], table.loc[("hybrid-int2-nolp", 4, "test", target)]
    assert one["target_acc"] == four["target_acc"] == pytest.approx(74.0)
    assert (one["reached"], one["epoch_mean"], one["seconds_mean"]) == ("1/2", 2.0, 4.0)
    assert (four["reached"], four["epoch_mean"], four["seconds_mean"]) == ("1/1", 3.0, 3.0)
    assert target not in set(table.xs("val", level="split").index.get_level_values("target"))
    assert target not in set(table.loc["hybrid-int2-lp"].index.get_level_values("target"))


def minibatch_epoch(steps, hit_rate, lookups):
    return {"steps": steps, "step_losses": [1.0] * steps, "hit_rate": hit_rate, "lookups": lookups,
            "pushed": [0] * len(lookups), "seconds": {}}


def test_a_minibatch_run_pools_its_epochs_hits_over_their_lookups_and_is_named_distgnn_mb(tmp_path):
    """Layer 1: 2 of 4, 2 of 2 and 0 of 6 lookups hit, 4 / 12, not the mean of the rates (1/2);
    layer 2: 2 of 8, none looked up, 2 of 4: 4 / 12; layer 0 (one rank: no halo) is never
    looked up. A full-batch run listed first has neither steps nor hit rates."""
    epochs = [minibatch_epoch(5, [None, 0.5, 0.25], [0, 4, 8]), minibatch_epoch(5, [None, 1.0, None], [0, 2, 0]),
              minibatch_epoch(5, [None, 0.0, 0.5], [0, 6, 4])]
    settings = {"batch_size": 32, "fanouts": "5,10,15", "hec_size": 1_000_000, "hec_push": 0, "hec_life": 2,
                "hec_delay": 1, "hec_flush": False}
    runs = runs_table([write_run(tmp_path / "full.jsonl", 2, {"dense": 1.0}, [1]),
                       write_run(tmp_path / "mb.jsonl", 2, {"dense": 1.0}, [1], minibatch=epochs, **settings)])
    assert list(runs.columns[-4:]) == ["minibatch_steps", "hit_rate_layer_0", "hit_rate_layer_1", "hit_rate_layer_2"]
    full, mb = runs.iloc[0], runs.iloc[1]
    assert mb["variant"] == "hybrid-fp32-nolp-mb32-push0" and mb["minibatch_steps"] == 5
    assert np.isnan(mb["hit_rate_layer_0"]) and mb["hit_rate_layer_1"] == mb["hit_rate_layer_2"] == pytest.approx(1 / 3)
    assert full["variant"] == "hybrid-fp32-nolp" and pd.isna(full["minibatch_steps"])
    assert full[["hit_rate_layer_0", "hit_rate_layer_1", "hit_rate_layer_2"]].isna().all()
    names = accuracy_table(runs).set_index("variant")["name"]
    assert names["hybrid-fp32-nolp-mb32-push0"] == "DistGNN-MB (push0)"


def test_a_real_minibatch_run_is_named_from_its_header(tiny_plans, tmp_path):
    """``supergcn train --batch-size 64`` at P = 2, two layers of fan-outs 5 and 10, 50 rows
    pushed: the tables name it for every setting off its default, count the steps of the rank
    with the most training nodes (ceil(n / 64)), and find cached rows at both layers."""
    out = tmp_path / "mb.jsonl"
    result = run_mpi(2, "train", "--graph", tiny_plans / "graph", "--partition", tiny_plans / "P2", "--plan",
                     tiny_plans / "P2-hybrid", "--epochs", 2, "--num-layers", 2, "--hidden", 16, "--batch-size", 64,
                     "--fanouts", "5,10", "--hec-push", 50, "--out", out)
    assert result.returncode == 0, result.stdout + result.stderr
    record = run_record(out)
    assert record["variant"] == "hybrid-fp32-nolp-mb64-fan5_10-push50"
    parts = np.load(tiny_plans / "P2" / "parts.npy")
    train = np.load(tiny_plans / "graph" / "train_mask.npy")
    assert record["minibatch_steps"] == max(math.ceil(train[parts == rank].sum() / 64) for rank in (0, 1))
    assert [epoch["minibatch"]["steps"] for epoch in read_metrics(out)[1]] == [record["minibatch_steps"]] * 2
    assert 0 < record["hit_rate_layer_0"] <= 1 and 0 < record["hit_rate_layer_1"] <= 1


def test_written_tables_show_a_missing_value_as_a_dash_not_nan(tmp_path):
    table = pd.DataFrame({"target": ["80 %", "90 %"], "reached": ["2/2", "0/2"], "seconds_mean": [4.0, np.nan]})
    write_table(table, tmp_path / "t", "Caption.")
    assert pd.read_csv(tmp_path / "t.csv")["seconds_mean"].isna().tolist() == [False, True]
    markdown = (tmp_path / "t.md").read_text().splitlines()
    assert markdown[0] == "Caption."
    assert [cell.strip() for cell in markdown[-1].split("|")[1:-1]] == ["90 %", "0/2", "—"]
    assert "nan" not in (tmp_path / "t.md").read_text() + (tmp_path / "t.tex").read_text()
    assert "90 \\% & 0/2 & --- \\\\" in (tmp_path / "t.tex").read_text()


def test_preprocessing_table_reports_each_steps_manifest_per_adjacency_entry(tmp_path, monkeypatch):
    from supergcn.data.datasets import prepare_dataset
    from supergcn.data.graph import save_graph
    from supergcn.partition.store import load_partition, run_partition
    from supergcn.plan.store import run_plan

    graph = prepare_dataset("synthetic-tiny", seed=0)
    meta = save_graph(graph, tmp_path / "g", seconds=1.5)
    part = run_partition(graph, meta["hash"], 2, tmp_path / "p2")
    partition, _ = load_partition(tmp_path / "p2")
    plan = run_plan(graph, meta["hash"], partition, part["partition_hash"], "post", tmp_path / "post")
    table = preprocessing_table([tmp_path / "g"], [tmp_path / "p2"], [tmp_path / "post"])
    assert table["step"].tolist() == ["prepare", "partition (metis)", "plan (post)"]
    assert table["P"].isna().tolist() == [True, False, False] and table["P"].iloc[1] == 2
    assert table["seconds"].tolist() == [1.5, part["seconds"], plan["seconds"]]
    entries = graph.num_edges
    assert (table["adjacency_entries"] == entries).all()
    partition_row = table.iloc[1]
    assert partition_row["edge_cut"] == part["edge_cut"]
    for name in ("nodes", "edges", "train_nodes"):
        assert partition_row[f"imbalance_{name}"] == part["balance"][name]["imbalance_max_over_mean"]
    # Below 50 M entries the peak is mostly the interpreter's: no bytes per entry are shown...
    assert table["bytes_per_entry"].isna().all()
    # ...from there on, the peak over the entries.
    monkeypatch.setattr(step_tables, "ENTRIES_FOR_BYTES_PER_ENTRY", entries)
    table = preprocessing_table([tmp_path / "g"], [tmp_path / "p2"], [tmp_path / "post"])
    np.testing.assert_allclose(table["bytes_per_entry"].astype(float),
                               np.array([meta["peak_memory_mib"], part["peak_memory_mib"],
                                         plan["peak_memory_mib"]]) * 2**20 / entries)
    with pytest.raises(SuperGCNError, match="belongs to none of its graphs"):
        preprocessing_table([], [tmp_path / "p2"], [])


def test_the_volume_table_counts_each_dataset_at_its_own_width(tiny_plans):
    """Two datasets over the same plan at widths 8 and 16: FP32 rows cost 4 B per feature,
    so every FP32 volume doubles; each row names the width it was counted at."""
    plan = tiny_plans / "P2-hybrid"
    table = volume_table([("narrow", plan), ("wide", plan)], {"narrow": 8, "wide": 16}).set_index("dataset")
    assert table.loc["narrow", "hidden"] == 8 and table.loc["wide", "hidden"] == 16
    for column in ("pre_bytes", "post_bytes", "hybrid_bytes"):
        assert table.loc["narrow", column] > 0 and table.loc["wide", column] == 2 * table.loc["narrow", column]
