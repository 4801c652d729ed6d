"""AdaQP's adaptive bit widths (Wan et al., MLSys '23) on our exchanges: ``--bits adaptive``.

Every exchange of a training pass (``forward<l>`` and ``backward<l>`` for layer l) has
its own assignment of 2, 4 or 8 bits to each row it sends:

1. Trace. In a traced epoch every rank records, for each row it sends, the value range
   (max - min) of the row; with the row's aggregation coefficients alpha (the row scale
   of every destination it reaches, told by the receiver once: forward rows reach
   destinations v scaled by D_v; gradient rows reach their sources unscaled) its
   variance weight is beta_k = sum_v alpha_{v,k}^2 * width * (max_k - min_k)^2 / 6
   (AdaQP §4.2, Theorem 1; AdaQP's code squares the sum of the alphas instead, we keep
   the paper's sum of squares, the variance of the aggregated values).
2. Group. Each rank sorts its rows for each peer by beta, largest first, and cuts them
   into groups of ``group_size`` rows (AdaQP's grouping); a group's beta is the sum.
3. Solve. Rank 0 gathers every rank's groups and solves Problem 12 for each exchange
   (:mod:`supergcn.methods.adaqp.solver`, HiGHS), then scatters the widths.
4. Tell. Every sender expands its groups' widths to its rows and sends each receiver the
   width of every row it will receive (one byte per row, once per assignment).

Traced epochs are epoch 1 and every ``period``-th epoch after it (but the last); the
assignment made at the end of a traced epoch holds from the next epoch on. Before the first assignment every
row travels at 8 bits, AdaQP's initial assignment. (AdaQP first assigns after ``period``
epochs at 8 bits, from traces summed over them; we assign after the first epoch, so that
short runs are assigned at all.)

Wire layout. Rows are quantized per width with the rounding chosen for the run
(:func:`supergcn.kernels.quantization.quantize`, AdaQP rounds stochastically) and each
peer's chunk holds its 2-bit, then 4-bit, then 8-bit rows, each block packed and padded
to whole bytes as a uniform exchange is; the (zero point, scale) pairs follow the same
row order in the second message.

The widths reach the exchange as its wire codec (:class:`~supergcn.distributed.protocol.WireCodec`,
:mod:`supergcn.methods.adaqp.codec`): the exact exchange asks it how each training exchange's
rows travel, and knows no more of AdaQP. Its runs are named "AdaQP" (with "w/ LP" where
label propagation is on, as the paper's comparison runs it on SuperGCN's hybrid plan).
"""

from __future__ import annotations

from supergcn.methods.card import MethodCard
from supergcn.naming import DEFAULT_MODEL
from supergcn.options import Range, option

#: ``bits`` of the runs whose widths AdaQP's solver assigns per message group.
ADAPTIVE = "adaptive"
#: AdaQP's defaults: lambda (variance against time; AdaQP's configs use 0.5), rows per message
#: group (AdaQP: 100 to 2,000 by dataset), epochs between assignments (the best of AdaQP's
#: sensitivity study).
ADAPTIVE_WEIGHT, ADAPTIVE_GROUP_SIZE, ADAPTIVE_PERIOD = 0.5, 100, 50


def _selected(values: dict) -> bool:
    return values.get("bits") == ADAPTIVE


def _published(values: dict) -> bool:
    """AdaQP's runs: GraphSAGE, its rows rounded stochastically (``--rounding auto`` in its
    runs, or ``stochastic``: AdaQP §3, "we stochastically quantize messages")."""
    return values["model"] == DEFAULT_MODEL and values.get("rounding", "auto") != "nearest"


OPTIONS = (
    ("adaptive_weight", "float", option(
        ADAPTIVE_WEIGHT, "adaptive bits: lambda, the weight of quantization variance against exchange time (1 = all "
        "8 bits, 0 = all 2 bits; AdaQP uses 0.5)", values=Range(float, 0, 1), group="adaqp", study=True,
        trajectory=True, read_when=_selected)),
    ("adaptive_group_size", "int", option(
        ADAPTIVE_GROUP_SIZE, "adaptive bits: rows per message group sharing a width", values=Range(int, 1),
        group="adaqp", study=True, trajectory=True, read_when=_selected)),
    ("adaptive_period", "int", option(
        ADAPTIVE_PERIOD, "adaptive bits: epochs between re-assignments (traced in epoch 1, 1 + period, ...)",
        values=Range(int, 1), group="adaqp", study=True, trajectory=True, read_when=_selected)),
)



CARD = MethodCard(
    name="adaqp", title="AdaQP", option="bits", selects=_selected,
    example={"bits": ADAPTIVE},
    run_name=lambda values: "AdaQP w/ LP" if values["label_propagation"] else "AdaQP",
    published=_published, runtime="codec", options=OPTIONS, rounding="stochastic",
    options_title="AdaQP's adaptive bit widths (--bits adaptive)",
    values={"bits": ((ADAPTIVE,), "adaptive = 2, 4 or 8 per message group, assigned by AdaQP's solver")},
    bits=(ADAPTIVE,))
