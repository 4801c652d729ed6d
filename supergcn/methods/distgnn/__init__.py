"""DistGNN's delayed remote partial aggregates (Md et al., SC '21): the schedules cd-r and 0c.

DistGNN sends the partial aggregates of boundary vertices (our ``pre`` rows) but not every
epoch: cd-r sends a bucket of them per epoch and adds each at its destination r epochs
later; 0c never communicates; cd-0 is the ordinary synchronous exchange (and is run by
:class:`~supergcn.distributed.rank_operators.RankOperators`, gradients included, so that it
equals ``pre`` exactly). The public implementation is DGL's DRPA (``dgl/distgnn``, PR
#3381); this module implements the same semantics on our edge-cut plans, where the owner
of a destination plays DRPA's root and every sender a leaf. Exactly:

Mean aggregation of destination v at a layer's t-th training pass (t = 0, 1, ...; one pass
per epoch) is

    y_v = (sum_{u in N_local(v)} x_u + sum_{k in A_t(v)} a_k) / (deg_local(v) + sum_{k in A_t(v)} c_k)

(0 where the denominator is 0), with a_k a received row of the plan's send buffer (a PRE
partial sum of c_k sources, or a POST source row, c_k = 1 per destination it serves) and
A_t(v) the rows that arrive for v at pass t. Like DRPA, the degree counts only what
arrived, so 0c is training on the graph with the cut edges removed.

* Buckets. Each sender cuts its block of rows for each peer into r contiguous chunks
  (chunk q holds rows floor(q n / r) .. floor((q + 1) n / r) - 1 of an n-row block). DRPA
  cuts a partition's split vertices, in local id order, into r contiguous chunks; there a
  vertex has copies on several partitions, here the send buffer is grouped by peer, so
  cutting each peer's block keeps every bucket about 1/r of every peer's traffic.
* Pass t computes the rows of bucket t mod r from the current input and starts sending
  them (a nonblocking Alltoallv, awaited r passes later). They are added at pass t + r,
  in place of nothing: A_t is the bucket t mod r computed at pass t - r, and passes t < r
  receive nothing (local neighbours and local degree only, as DRPA's first r epochs).
  A bucket's remote rows thus reach their destination once every r epochs, r epochs old.
* Backward. Arrived rows are constants (DRPA's backward returns the gradient unchanged):
  dL/dx = L^T (G / deg_t), local only; no gradient is exchanged, so a cd-r epoch sends
  one bucket forward per layer and nothing backward.
* Evaluation uses the exact synchronous aggregation, as DistGNN evaluates on the whole
  graph, so accuracies are comparable across schedules.
* DRPA's roots also send their updated sums back to their leaves (copies of the same
  vertex); with an edge cut a vertex has no copies, so that half has no counterpart.

Only the mean aggregation (GraphSAGE) is defined this way, as in DistGNN, on a ``pre``
plan's partial aggregates, float32. The delayed mean: :mod:`supergcn.methods.distgnn.exchange`.
"""

from __future__ import annotations

import re

from supergcn.methods.card import MethodCard, VariantNaming
from supergcn.naming import DEFAULT_MODEL

#: DistGNN's schedules: cd-<r> (one spelling per delay, no leading zeros; cd-0 is the
#: synchronous exchange) and 0c, never.
NO_COMMUNICATION = "0c"
DELAYED_PATTERN = rf"{NO_COMMUNICATION}|cd-(?:0|[1-9][0-9]*)"


def schedule_delay(schedule: str) -> int | None:
    """DistGNN's delay r of a ``cd-<r>`` schedule, None for ``0c`` (never).

    Args:
        schedule: one of DistGNN's schedules.

    Returns:
        r, or None.

    Raises:
        ValueError: not one of DistGNN's schedules.
    """
    if not re.fullmatch(DELAYED_PATTERN, schedule):
        raise ValueError(f"{schedule!r} is not one of DistGNN's schedules: cd-<r> with r >= 0 (e.g. cd-5) or 0c")
    return None if schedule == NO_COMMUNICATION else int(schedule[len("cd-"):])


def _selects(values: dict) -> bool:
    return re.fullmatch(DELAYED_PATTERN, str(values.get("schedule"))) is not None


def _published(values: dict) -> bool:
    """DistGNN's runs: float32 partial aggregates of a pre plan, GraphSAGE, no label inputs."""
    return (values["bits"] == 32 and not values["label_propagation"] and values["model"] == DEFAULT_MODEL
            and values["strategy"] == "pre")



CARD = MethodCard(
    name="distgnn", title="DistGNN", option="schedule", selects=_selects,
    example={"schedule": "cd-5"},
    run_name=lambda values: f"DistGNN ({values['schedule']})", published=_published, runtime="exchange",
    values={"schedule": (DELAYED_PATTERN, "DistGNN's delayed partial aggregates: cd-<r> (a bucket of them per "
                         "epoch, added r epochs later; cd-0 = sync) or 0c (never)")},
    naming=VariantNaming(key="schedule", suffix=lambda schedule: f"-{schedule}", pattern=f"-(?:{DELAYED_PATTERN})",
                         read=lambda suffix: suffix[1:]),
    model_needs="delayable", strategies=("pre",), precompute="refused", ignores=("overlap",))
