"""A run's accuracy curve: validation and test accuracy per epoch against training time.

The training time until the end of epoch e is ``sum_{i <= e} t_i``, with ``t_i`` the
epoch's wall time (its max over ranks, the first epoch included) and evaluation
excluded. Both the ``time_to_accuracy`` table (:mod:`supergcn.report.tables`) and the
accuracy-curve figure (:mod:`supergcn.report.figures`) read runs through it; it imports
nothing of training's kernels, so editing them reruns neither.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from supergcn.train.metrics import read_metrics

#: The splits whose accuracy the curves follow.
TARGET_SPLITS = ("val", "test")


def accuracy_curve(path: str | Path) -> pd.DataFrame:
    """A run's ``epoch``, ``seconds`` (training time until the end of that epoch) and
    ``val_acc`` / ``test_acc`` per epoch, NaN where a split is empty."""
    _, epochs, _ = read_metrics(path)
    curve = pd.DataFrame({"epoch": [e["epoch"] for e in epochs],
                          "seconds": np.cumsum([e["seconds"]["max"]["total"] for e in epochs])})
    for split in TARGET_SPLITS:
        curve[f"{split}_acc"] = pd.to_numeric(pd.Series([e[f"{split}_acc"] for e in epochs], dtype=object))
    return curve
