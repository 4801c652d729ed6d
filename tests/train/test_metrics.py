"""The metrics file: written in one piece when the run ends, read back, refused when damaged."""

import json

import numpy as np
import pytest
from mpi4py import MPI

from supergcn.distributed.timing import PhaseTimer
from supergcn.errors import SuperGCNError
from supergcn.train.metrics import (
    METRICS_FORMAT,
    epoch_record,
    print_progress,
    read_metrics,
    summary_record,
    write_metrics,
)

HEADER = {"type": "header", "format": METRICS_FORMAT}


def seconds(total, aggregation):
    timer = PhaseTimer()
    timer.seconds["aggregation"] = aggregation
    return {**timer.breakdown(total), "cpu_user": 2 * total, "cpu_system": 0.1}


def traffic(data, params, attention=(0, 0)):
    return {"sent": {"data": np.array(data), "params": np.array(params), "attention": np.array(attention)},
            "received": {"data": np.array(data[::-1]), "params": np.array(params[::-1]),
                         "attention": np.array(attention[::-1])}}


def test_epoch_record_of_one_rank():
    record = epoch_record(MPI.COMM_SELF, 4, 0.5, seconds(2.0, 0.5), traffic([0, 30], [0, 4], [0, 6]),
                          {"val_acc": 0.9}, 44, warm_up=False)
    assert record["epoch"] == 4 and record["val_acc"] == 0.9 and record["warm_up"] is False
    assert record["seconds"]["max"]["total"] == 2.0 and record["seconds"]["slowest_rank"]["aggregation"] == 0.5
    assert record["bytes"]["sent_total"] == 40 and record["bytes"]["data_sent_total"] == 30
    assert record["bytes"]["params_sent_total"] == 4 and record["bytes"]["attention_sent_total"] == 6
    assert record["bytes"]["received_per_rank"] == [40] and record["bytes"]["allreduce_per_rank"] == 44


def test_summary_excludes_the_first_epoch_from_the_mean():
    records = [{"seconds": {"max": {"total": t}}} for t in (9.0, 1.0, 3.0)]
    best = {"val_acc": 0.8, "epoch": 2, "test_acc": 0.7}
    summary = summary_record(records, best, {"test_acc": 0.6}, ["a", "a"], [1, 2])
    assert summary["mean_epoch_seconds"] == 2.0 and summary["epochs"] == 3
    assert summary["test_acc_at_best_val"] == 0.7 and summary["identical_parameters"]
    assert not summary_record(records, {"val_acc": 0, "epoch": 0, "test_acc": 0}, {}, ["a", "b"], [1, 2])[
        "identical_parameters"]


def test_a_resumed_run_leaves_out_the_warm_up_epoch_of_each_process():
    """Epochs 1-4 ran in one process, 5-6 in the one that resumed from the checkpoint:
    epochs 1 and 5 paid one-off costs."""
    times = (9.0, 1.0, 1.0, 1.0, 7.0, 4.0)
    records = [{"seconds": {"max": {"total": t}}, "warm_up": epoch in (1, 5)} for epoch, t in enumerate(times, 1)]
    summary = summary_record(records, {"val_acc": None, "epoch": None, "test_acc": None}, {}, ["a"], [1])
    assert summary["mean_epoch_seconds"] == pytest.approx((1.0 + 1.0 + 1.0 + 4.0) / 4)


def test_writer_writes_the_whole_file_at_once_and_prints_progress(tmp_path, capsys):
    out = tmp_path / "m.jsonl"
    epochs = [{"type": "epoch", "epoch": e, "loss": 0.5, "train_acc": 0.25, "val_acc": None,
               "seconds": {"max": {"total": 0.125}}} for e in (1, 2)]
    for record in epochs:
        print_progress(record)
    assert not out.exists()
    assert capsys.readouterr().out.splitlines() == ["epoch 1: loss 0.5000 train 0.2500 (0.125 s)",
                                                    "epoch 2: loss 0.5000 train 0.2500 (0.125 s)"]
    write_metrics(out, HEADER, epochs, {"type": "summary", "epochs": 2})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.jsonl"]  # no temporary left
    header, read, summary = read_metrics(out)
    assert header == HEADER and [e["epoch"] for e in read] == [1, 2] and summary["epochs"] == 2
    assert len(out.read_text().splitlines()) == 4 and json.loads(out.read_text().splitlines()[0])


@pytest.mark.parametrize("damage, message", [
    (lambda text: text[:len(text) // 2], "line 2 is not JSON"),  # cut inside the first epoch line
    (lambda text: "".join(text.splitlines(keepends=True)[:2]), "not a complete metrics file"),
    (lambda text: "", "not a complete metrics file"),
])
def test_a_damaged_metrics_file_is_refused_with_its_fix(tmp_path, damage, message):
    out = tmp_path / "m.jsonl"
    write_metrics(out, {**HEADER, "pad": "x" * 10}, [{"type": "epoch", "epoch": 1, "pad": "y" * 200}],
                  {"type": "summary"})
    out.write_text(damage(out.read_text()))
    with pytest.raises(SuperGCNError, match=message) as caught:
        read_metrics(out)
    assert "rerun its training job" in str(caught.value)


def test_a_missing_metrics_file_names_the_job_to_run(tmp_path):
    with pytest.raises(SuperGCNError, match="not found — run its training job first"):
        read_metrics(tmp_path / "nowhere.jsonl")


@pytest.mark.parametrize("header", [{"type": "header"}, {**HEADER, "format": "supergcn-metrics/0"}],
                         ids=["no format", "another format"])
def test_a_metrics_file_of_another_format_is_refused_with_its_fix(tmp_path, header):
    out = tmp_path / "m.jsonl"
    write_metrics(out, header, [{"type": "epoch", "epoch": 1}], {"type": "summary"})
    with pytest.raises(SuperGCNError, match=f"not a metrics file of this supergcn version .*expected "
                                            f"'{METRICS_FORMAT}'.* — delete it and rerun its training job"):
        read_metrics(out)
