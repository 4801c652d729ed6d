"""How sure a table's figures are: spreads pooled over runs and epochs, carried through
ratios, and the digits a figure is shown with.

A value shown beside its spread gets as many decimals as the spread's second significant
digit: 0.3388 s with a standard deviation of 0.021 s is shown as 0.339 and 0.021, a
speed-up of 1.8917 ± 0.12 as 1.89 and 0.12. A value's spread is the column named after it
with ``_sd`` or ``_std`` (a ``<stem>_mean``'s is ``<stem>_std``). The CSV keeps every digit;
Markdown and LaTeX show these (:func:`shown`). A value with no spread, or a spread of 0 or
none known, keeps four significant digits, as every other figure of a table.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

#: Significant digits of a figure with no spread beside it.
PLAIN_DIGITS = 4


def pooled_sd(counts, means, sds) -> float:
    """The sample standard deviation of all the samples of several groups together, from
    each group's count n_i, mean m_i and sample standard deviation s_i:
    sqrt((Σ (n_i − 1) s_i² + Σ n_i (m_i − M)²) / (N − 1)), M = Σ n_i m_i / N, N = Σ n_i.
    Over seeds' runs and their epochs, it holds the spread between runs and within them.

    Args:
        counts: samples per group.
        means: the groups' means.
        sds: the groups' sample standard deviations (NaN or 0 where a group has one sample).

    Returns:
        The standard deviation; NaN where there is one sample in all.
    """
    counts, means = np.asarray(counts, dtype=np.float64), np.asarray(means, dtype=np.float64)
    sds = np.nan_to_num(np.asarray(sds, dtype=np.float64))
    total = counts.sum()
    if total < 2:
        return math.nan
    grand = float((counts * means).sum() / total)
    within = float(((counts - 1) * sds**2).sum())
    between = float((counts * (means - grand) ** 2).sum())
    return math.sqrt((within + between) / (total - 1))


def ratio_sd(ratio, numerator, numerator_sd, denominator, denominator_sd):
    """The spread of ``ratio`` = numerator / denominator from theirs, to first order:
    ratio · sqrt((σ_n / n)² + (σ_d / d)²) (NaN where one is unknown).

    Args:
        ratio, numerator, numerator_sd, denominator, denominator_sd: arrays or scalars.

    Returns:
        Of the shape of ``ratio``.
    """
    return ratio * np.sqrt((numerator_sd / numerator) ** 2 + (denominator_sd / denominator) ** 2)


def spread_columns(table: pd.DataFrame) -> dict[str, str]:
    """Each column of ``table`` that has a spread column, with it (module docstring)."""
    pairs = {}
    for column in table.columns:
        stem = column[:-5] if column.endswith("_mean") else column
        for spread in (f"{column}_sd", f"{column}_std", f"{stem}_sd", f"{stem}_std"):
            if spread != column and spread in table.columns:
                pairs[column] = spread
                break
    return pairs


def decimals(spread: float) -> int | None:
    """Decimals that end a figure at its spread's second significant digit (at least 0); None
    where the spread is unknown or 0."""
    if not np.isfinite(spread) or spread <= 0:
        return None
    return max(0, 1 - math.floor(math.log10(spread)))


def _plain(value) -> str | None:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return None
    if isinstance(value, (float, np.floating)):
        return f"{value:.{PLAIN_DIGITS}g}"
    return str(value)


def shown(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` as Markdown and LaTeX show it: every cell as text (None where missing), each
    value with a spread to its spread's digits and the spread itself to two significant
    digits (module docstring), every other number to four significant digits.

    Args:
        table: a result table.

    Returns:
        A table of the same rows and columns, of strings and None.
    """
    text = table.astype(object).map(_plain)
    for column, spread in spread_columns(table).items():
        for row, (value, sd) in enumerate(zip(table[column], table[spread])):
            places = decimals(float(sd)) if pd.notna(sd) else None
            if places is None or not isinstance(value, (float, np.floating)) or not np.isfinite(value):
                continue
            text.iat[row, table.columns.get_loc(column)] = f"{value:.{places}f}"
            text.iat[row, table.columns.get_loc(spread)] = f"{sd:.{places}f}"
    return text.astype(object).where(text.notna(), None)  # map turns a None back into NaN
