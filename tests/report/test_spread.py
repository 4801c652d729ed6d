"""Spreads pooled and carried, and the digits a figure is shown with."""

import math

import numpy as np
import pandas as pd
import pytest

from supergcn.report.spread import decimals, pooled_sd, ratio_sd, shown, spread_columns


def test_pooled_sd_is_the_sd_of_all_samples_together():
    rng = np.random.default_rng(0)
    groups = [rng.normal(mean, 0.1, size) for mean, size in ((1.0, 5), (1.3, 8), (0.9, 1))]
    counts = [len(g) for g in groups]
    means = [g.mean() for g in groups]
    sds = [g.std(ddof=1) if len(g) > 1 else math.nan for g in groups]
    assert pooled_sd(counts, means, sds) == pytest.approx(np.concatenate(groups).std(ddof=1))
    assert math.isnan(pooled_sd([1], [2.0], [math.nan])), "one sample: no spread"


def test_a_ratio_carries_both_relative_spreads():
    # 10 ± 1 over 5 ± 0.5: 2 with 10 % and 10 % relative spreads, sqrt(2) x 10 % of 2.
    assert ratio_sd(2.0, 10.0, 1.0, 5.0, 0.5) == pytest.approx(2 * math.sqrt(0.02))


@pytest.mark.parametrize("spread, places", [(0.021, 3), (0.12, 2), (3.4, 1), (34, 0), (340, 0), (0.0, None),
                                            (math.nan, None)])
def test_a_figure_ends_at_its_spreads_second_digit(spread, places):
    assert decimals(spread) == places


def test_tables_show_values_to_their_spreads_digits_and_others_to_four():
    table = pd.DataFrame({"P": [1, 2], "epoch_seconds": [0.33881, 1.5], "epoch_seconds_sd": [0.0213, 0.0],
                          "test_acc_mean": [81.234, 80.0], "test_acc_std": [1.27, math.nan],
                          "bytes": [123456789.0, math.nan]})
    assert spread_columns(table) == {"epoch_seconds": "epoch_seconds_sd", "test_acc_mean": "test_acc_std"}
    text = shown(table)
    assert text.iloc[0].tolist() == ["1", "0.339", "0.021", "81.2", "1.3", "1.235e+08"]
    # No spread, or a spread of 0: four significant digits; a missing value stays missing.
    assert text.iloc[1].tolist() == ["2", "1.5", "0", "80", None, None]
