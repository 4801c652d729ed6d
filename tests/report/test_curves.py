"""A run's accuracy curve read from a metrics file written the way a training run writes it."""

import numpy as np

from supergcn.report.curves import accuracy_curve
from supergcn.train.metrics import METRICS_FORMAT, summary_record, write_metrics


def test_the_curve_sums_epoch_times_and_leaves_an_empty_split_out(tmp_path):
    records = [{"type": "epoch", "epoch": e, "seconds": {"max": {"total": t}, "slowest_rank": {"total": t}},
                "bytes": {"sent_total": 0}, "val_acc": None, "test_acc": a}
               for e, (t, a) in enumerate(zip([2.0, 0.5, 1.25], [0.25, 0.5, 0.75]), start=1)]
    header = {"type": "header", "format": METRICS_FORMAT, "dataset": "g", "num_ranks": 1, "strategy": "hybrid",
              "threads_per_rank": 1, "config": {"bits": 32, "label_rate": 0.0, "seed": 0}}
    best = {"val_acc": None, "epoch": None, "test_acc": None}
    path = tmp_path / "run.jsonl"
    write_metrics(path, header, records, summary_record(records, best, {"test_acc": 0.75}, ["h"], [1]))

    curve = accuracy_curve(path)

    assert curve["epoch"].tolist() == [1, 2, 3]
    assert curve["seconds"].tolist() == [2.0, 2.5, 3.75]
    assert curve["test_acc"].tolist() == [0.25, 0.5, 0.75]
    assert curve["val_acc"].isna().all() and curve["val_acc"].dtype == np.float64
