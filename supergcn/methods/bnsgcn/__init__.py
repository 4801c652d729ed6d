"""BNS-GCN's boundary node sampling (Wan et al., MLSys '22): each epoch every rank sends a
random share p of its boundary rows, scaled up by the share's inverse, and the edges of
the others are dropped for that epoch.

With the rank's operators of :mod:`supergcn.distributed.rank_operators` (L the local CSR,
S the send operator, one row per send-buffer row; R the receive side's CSR; D the row
scale, the full graph's degrees), at each training pass (one per epoch) rank i draws, for
each peer j, k_ij = floor(p n_ij) of the n_ij rows it sends j, uniformly without
replacement, and sends their positions once (int64 ids). With S_p the drawn rows of S,
R_p the columns of R they arrive in and c_ij = n_ij / k_ij, every aggregation of the pass
is

    Y = D (L X + R_p C S_p X),      dLoss/dX = L^T D G + S_p^T C R_p^T D G,

C the diagonal of each drawn row's c: rows are sent as ``c · (S_p X)`` and their gradients
come back and are scaled by c on arrival. For any fixed X, E[R_p C S_p X] = R S X: each row
is drawn with probability k/n, so the sampled aggregation is unbiased (BNS-GCN §3.2).
The public code (``GATECH-EIC/BNS-GCN``, ``train.py`` ``get_send_size``,
``helper/feature_buffer.py``) sends ``feat[selected] / ratio`` with ratio = k / n and scales
the returned gradients by 1 / ratio the same way; normalisation keeps the full graph's
degrees; evaluation exchanges every row (here: the exact exchange).

Its layers aggregate before they transform, as the public code's GraphSAGE layer does
(``module/layer.py``: ``linear1(feat) + linear2(ah)``, ``ah`` the mean of the raw rows), so a
layer exchanges its input's rows, not its output's (the last layer's too).

Bytes per epoch: 8 sum_ij k_ij for the ids, plus, at every layer that exchanges, forward
and back, sum_ij k_ij rows of the layer's input width in float32 (layer 0's features forward
only, where not precomputed: nothing needs their gradient). p = 1 draws every row in
order, so it computes what the plain exchange does, bit for bit (but sends the ids);
p = 0 calls no exchange at all.

Plans. BNS-GCN samples boundary nodes, the POST rows of a ``post`` plan. The same draw on a
``pre`` or ``hybrid`` plan samples partial aggregates (a PRE row is the sum of a
destination's neighbours on the sender), and stays unbiased for the same reason: any row
of S X drawn with probability k/n and scaled by n/k has its own expectation. Its variance
differs: a PRE row carries several edges to one destination, dropped or kept together.
No published system samples PRE rows (docs/methods.md measures it). The sampled exchange
of one rank: :mod:`supergcn.methods.bnsgcn.exchange`.
"""

from __future__ import annotations

from decimal import Decimal

from supergcn.methods.card import MethodCard, PerformanceTerms, VariantNaming
from supergcn.naming import DEFAULT_MODEL
from supergcn.options import Range, option

#: BNS-GCN's share of boundary rows sampled each epoch, as a variant's name spells it
#: (``bns0.1``; 1, every row, is the plain exchange and has no suffix).
BOUNDARY_RATE_PATTERN = r"0|0\.[0-9]*[1-9]"


def rate_text(rate: float) -> str:
    """A boundary rate as a variant's name spells it: positional, shortest, no trailing
    zeros (0.1 -> ``0.1``, 1e-3 -> ``0.001``, 0 -> ``0``).

    Args:
        rate: the rate.

    Returns:
        Its text.
    """
    text = format(Decimal(repr(float(rate))), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


OPTIONS = (
    ("boundary_rate", "float", option(
        1.0, "BNS-GCN: share of its boundary rows each rank samples per peer and epoch, floor(rate x rows), in "
        "[0, 1]; each is sent scaled by rows/sampled, the unsampled ones' edges are dropped for the epoch "
        "(1 = every row, the plain exchange)", values=Range(float, 0, 1), group="bnsgcn", trajectory=True,
        read_when=lambda values: values.get("boundary_rate", 1) != 1)),
)


def _published(values: dict) -> bool:
    """BNS-GCN's runs: float32 rows of a post plan (its boundary), GraphSAGE, no label inputs."""
    return (values["bits"] == 32 and not values["label_propagation"] and values["model"] == DEFAULT_MODEL
            and values["strategy"] == "post")



CARD = MethodCard(
    name="bnsgcn", title="BNS-GCN", option="boundary_rate",
    selects=lambda values: values.get("boundary_rate", 1) < 1,
    example={"boundary_rate": 0.1},
    run_name=lambda values: f"BNS-GCN (p = {rate_text(values['boundary_rate'])})", published=_published,
    runtime="exchange",
    options=OPTIONS, options_title="BNS-GCN's boundary sampling",
    naming=VariantNaming(key="boundary_rate", value=float, suffix=lambda rate: f"-bns{rate_text(rate)}",
                         pattern=f"-bns(?:{BOUNDARY_RATE_PATTERN})", read=lambda suffix: float(suffix[len("-bns"):])),
    model_needs="linear_aggregation", precompute="published", aggregates_first=True,
    performance=PerformanceTerms("bns", "boundary", sampled=True))
