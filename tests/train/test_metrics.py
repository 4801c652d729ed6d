"""The metrics file: written as a partial file, renamed when complete, read back."""

import json

import numpy as np
import pytest
from mpi4py import MPI

from supergcn.distributed.timing import PhaseTimer
from supergcn.errors import SuperGCNError
from supergcn.train.metrics import MetricsWriter, epoch_record, read_metrics, summary_record


def seconds(total, aggregation):
    timer = PhaseTimer()
    timer.seconds["aggregation"] = aggregation
    return {**timer.breakdown(total), "cpu_user": 2 * total, "cpu_system": 0.1}


def traffic(data, params):
    return {"sent": {"data": np.array(data), "params": np.array(params)},
            "received": {"data": np.array(data[::-1]), "params": np.array(params[::-1])}}


def test_epoch_record_of_one_rank():
    record = epoch_record(MPI.COMM_SELF, 4, 0.5, seconds(2.0, 0.5), traffic([0, 30], [0, 4]), {"val_acc": 0.9}, 44)
    assert record["epoch"] == 4 and record["val_acc"] == 0.9
    assert record["seconds"]["max"]["total"] == 2.0 and record["seconds"]["slowest_rank"]["aggregation"] == 0.5
    assert record["bytes"]["sent_total"] == 34 and record["bytes"]["data_sent_total"] == 30
    assert record["bytes"]["received_per_rank"] == [34] and record["bytes"]["allreduce_per_rank"] == 44


def test_summary_excludes_the_first_epoch_from_the_mean():
    records = [{"seconds": {"max": {"total": t}}} for t in (9.0, 1.0, 3.0)]
    best = {"val_acc": 0.8, "epoch": 2, "test_acc": 0.7}
    summary = summary_record(records, best, {"test_acc": 0.6}, ["a", "a"], [1, 2])
    assert summary["mean_epoch_seconds"] == 2.0 and summary["epochs"] == 3
    assert summary["test_acc_at_best_val"] == 0.7 and summary["identical_parameters"]
    assert not summary_record(records, {"val_acc": 0, "epoch": 0, "test_acc": 0}, {}, ["a", "b"], [1, 2])[
        "identical_parameters"]


def test_writer_renames_only_a_complete_file(tmp_path):
    out = tmp_path / "m.jsonl"
    writer = MetricsWriter(out)
    writer.start({"type": "header"}, [{"type": "epoch", "epoch": 1}])
    writer.epoch({"type": "epoch", "epoch": 2})
    assert not out.exists() and (tmp_path / "m.jsonl.partial").exists()
    with pytest.raises(SuperGCNError, match="not a complete metrics file"):
        read_metrics(tmp_path / "m.jsonl.partial")
    writer.finish({"type": "summary", "epochs": 2})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.jsonl"]
    header, epochs, summary = read_metrics(out)
    assert header == {"type": "header"} and [e["epoch"] for e in epochs] == [1, 2] and summary["epochs"] == 2
    assert len(out.read_text().splitlines()) == 4 and json.loads(out.read_text().splitlines()[0])
