"""How the study's figures draw: each variant's style (colour, marker, line style, hatch),
one legend below the panels, and figure files written whole.

Shared by the figures of a scaling study (:mod:`supergcn.report.figures`) and of the
performance model (:mod:`supergcn.report.perf_figures`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from supergcn.data.storage import atomic_file


def pyplot():
    """matplotlib.pyplot on the file-only Agg back end.

    Returns:
        The ``matplotlib.pyplot`` module.
    """
    import matplotlib
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt
    return plt


#: Markers, line styles and bar hatches that tell variants apart where colours do not (a
#: greyscale print, a reader who cannot tell red from green). Eleven markers beside tab10's
#: ten colours: the (colour, marker) pairs repeat only after 110 variants.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h")
LINESTYLES = ("-", "--", ":", "-.", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (1, 3)), (0, (8, 2, 2, 2)),
              (0, (5, 3, 1, 3, 1, 3)))
HATCHES = ("", "//", "\\\\", "xx", "..", "++", "--", "||", "oo", "**")
#: Inches a legend entry takes per character of its label, and for its handle and gaps (the
#: small font), from which the columns of a legend that fits the figure's width follow.
LEGEND_INCHES_PER_CHAR, LEGEND_HANDLE_INCHES = 0.068, 0.8


@dataclass(frozen=True)
class VariantStyle:
    """How one variant is drawn in every figure: its colour, and its marker, line style and
    bar hatch, which alone tell it apart in greyscale.

    Args:
        color: the RGB colour of its lines and bars.
        marker: its lines' marker.
        linestyle: its lines' dash pattern.
        hatch: its bars' hatch.
    """

    color: tuple[float, float, float]
    marker: str
    linestyle: str | tuple
    hatch: str


def variant_styles(variants) -> dict[str, VariantStyle]:
    """The k-th variant (in order of first appearance) gets tab10's colour k mod 10, marker
    k mod 11, line style k mod 9 and hatch k mod 10: the same style in every panel, and
    distinct (colour, marker) pairs for up to 110 variants.

    Args:
        variants: variant names, repeats allowed.

    Returns:
        Variant name -> its style.
    """
    import matplotlib

    colors = matplotlib.colormaps["tab10"].colors
    return {variant: VariantStyle(colors[k % len(colors)], MARKERS[k % len(MARKERS)],
                                  LINESTYLES[k % len(LINESTYLES)], HATCHES[k % len(HATCHES)])
            for k, variant in enumerate(dict.fromkeys(variants))}


def legend_columns(labels, width_inches: float) -> int:
    """How many columns a legend of ``labels`` can have within ``width_inches``: as many as
    entries of the longest label fit side by side, at least 1.

    Args:
        labels: the legend's labels.
        width_inches: the figure's width.

    Returns:
        The number of columns, 1 to ``len(labels)``.
    """
    entry = LEGEND_HANDLE_INCHES + LEGEND_INCHES_PER_CHAR * max(map(len, labels), default=0)
    return max(1, min(len(labels), int(width_inches // entry)))


def shared_legend(figure, handles, labels, **options) -> None:
    """One legend for the whole figure, below its panels and outside every axes (the figure
    must use the constrained layout, which makes room for it).

    Args:
        figure: the figure.
        handles: the legend's artists (a tuple draws its parts side by side).
        labels: their labels.
        **options: passed to :meth:`matplotlib.figure.Figure.legend`.
    """
    from matplotlib.legend_handler import HandlerTuple

    columns = legend_columns(labels, figure.get_figwidth())
    figure.legend(handles, labels, loc="outside lower center", ncols=columns, fontsize="small",
                  handler_map={tuple: HandlerTuple(ndivide=None)}, **options)


def legend_inches(entries: int, columns: int) -> float:
    """The height a legend of ``entries`` in ``columns`` adds below the panels."""
    return 0.3 + 0.22 * -(-entries // columns)


def save_figure(figure, stem: Path) -> None:
    """``stem``.png and .pdf, each written under a temporary name and renamed.

    Args:
        figure: a matplotlib figure, closed afterwards.
        stem: the files' path without suffix.

    Raises:
        SuperGCNError: a file cannot be written, or the disk filled.
    """
    for suffix in (".png", ".pdf"):
        with atomic_file(stem.with_suffix(suffix)) as tmp:
            figure.savefig(tmp, dpi=150, bbox_inches="tight", format=suffix[1:])
    pyplot().close(figure)
