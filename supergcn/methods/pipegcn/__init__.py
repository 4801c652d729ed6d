"""PipeGCN's pipelined exchange (Wan et al., ICLR '22): every boundary row and boundary
gradient one epoch stale, the exchange of an epoch running behind the next epoch's compute.

With the rank's operators of :mod:`supergcn.distributed.rank_operators` (L the local CSR,
S the send operator, R the receive side's CSR, D the row scale), a layer's aggregation at
training pass t (t = 1, 2, ...; one pass per epoch) is

    Y_t = D (L X_t + R B_{t-1}),          B_{t-1} = exchange(S X_{t-1}),          B_0 = 0,

and its backward, with G_t = dLoss/dY_t,

    dLoss/dX_t = L^T D G_t + S^T H_{t-1},  H_{t-1} = exchange^T(R^T D G_{t-1}),  H_0 = 0.

Pass t starts the exchanges of S X_t and of R^T D G_t (nonblocking Alltoallv, polled while
the local aggregation runs) and waits for them at pass t + 1, where their rows are used:
the exchange moves exactly the synchronous exchange's bytes and has a whole epoch of
compute to hide behind. PipeGCN's public code does the same with a thread pool, its
buffers zero at epoch 0 (``GATECH-EIC/PipeGCN`` ``helper/feature_buffer.py``).

* Smoothing (``pipe-f``, ``pipe-g``, ``pipe-fg``; PipeGCN's ``--feat-corr`` and
  ``--grad-corr``): the features, gradients or both are replaced by a moving average of what
  arrives, A_t = gamma A_{t-1} + (1 - gamma) B_{t-1}, zero-initialised and without bias
  correction (A_1 = 0), gamma = 0.95 unless set.
* Strategies. The aggregation is linear, so R B_{t-1} = A_remote X_{t-1} whether B holds
  PRE partial sums or POST source rows: pre, post and hybrid plans train the same model up
  to float rounding (PipeGCN's is post), and hybrid's fewer rows are what goes stale.
* Models. Defined where a layer's aggregation is a row-scaled sum of rows (SAGE, GCN,
  GIN: :attr:`~supergcn.models.card.ModelCard.linear_aggregation`); GAT's softmax takes
  its scores and maxima over all of a destination's neighbours at once, which a stale
  exchange of rows alone does not define.
* Layers aggregate before they transform (its card says so, as PipeGCN's layers do), so
  the stale rows are a layer's input at t - 1 multiplied by pass t's weights; a
  transform-first layer would make the weights stale too.
* Evaluation uses the exact synchronous exchange, as PipeGCN evaluates on the full graph.

How it differs from DistGNN's cd-1 (:mod:`supergcn.methods.distgnn`), which also adds each
remote row one epoch late: cd-1 sends partial aggregates forward only (its arrived rows are
constants, so no gradient crosses ranks; PipeGCN returns the boundary gradients, one epoch
stale too), divides by the degree of what arrived (local only at the first pass; PipeGCN by
the full degree, with zeros in place of the remote rows), is defined for the mean of a
``pre`` plan only, and sends half PipeGCN's bytes (``tests/methods/test_pipegcn.py`` shows
each difference).

The stale exchange of one rank: :mod:`supergcn.methods.pipegcn.exchange`.
"""

from __future__ import annotations

from supergcn.methods.card import MethodCard, PerformanceTerms, VariantNaming
from supergcn.naming import DEFAULT_MODEL
from supergcn.options import Range, option

#: PipeGCN's schedules and the names its paper gives them: rows and gradients one epoch
#: stale, with the received features (f), gradients (g) or both smoothed by a moving average.
PIPELINED_SCHEDULES = {"pipe": "PipeGCN", "pipe-f": "PipeGCN-F", "pipe-g": "PipeGCN-G", "pipe-fg": "PipeGCN-GF"}
PIPELINED_PATTERN = "|".join(sorted(PIPELINED_SCHEDULES, key=len, reverse=True))
#: PipeGCN's smoothing momentum (its --corr-momentum default).
PIPE_MOMENTUM = 0.95


def _smoothed(values: dict) -> bool:
    return values.get("schedule") in PIPELINED_SCHEDULES and values["schedule"] != "pipe"


OPTIONS = (
    ("pipe_momentum", "float", option(
        PIPE_MOMENTUM, "pipe-f, pipe-g, pipe-fg: gamma of the moving average of received rows, avg = gamma avg + "
        "(1 - gamma) received (PipeGCN: 0.95)", values=Range(float, 0, 1, high_open=True), group="pipegcn",
        study=True, trajectory=True, read_when=_smoothed, read_hint="--schedule pipe-f, pipe-g or pipe-fg")),
)


def _published(values: dict) -> bool:
    """PipeGCN's runs: float32 rows of a post plan (its boundary), GraphSAGE, no label inputs."""
    return (values["bits"] == 32 and not values["label_propagation"] and values["model"] == DEFAULT_MODEL
            and values["strategy"] == "post")



CARD = MethodCard(
    name="pipegcn", title="PipeGCN", option="schedule",
    selects=lambda values: values.get("schedule") in PIPELINED_SCHEDULES,
    example={"schedule": "pipe-f"},
    run_name=lambda values: PIPELINED_SCHEDULES[values["schedule"]], published=_published, runtime="exchange",
    options=OPTIONS, options_title="PipeGCN's stale exchange (--schedule pipe, pipe-f, pipe-g or pipe-fg)",
    values={"schedule": (PIPELINED_PATTERN, "PipeGCN's rows and gradients one epoch stale, exchanged behind the "
                         "next epoch's compute: pipe, or pipe-f, pipe-g, pipe-fg with the received features, gradients "
                         "or both smoothed (--pipe-momentum); its layers aggregate before they transform")},
    naming=VariantNaming(key="schedule", suffix=lambda schedule: f"-{schedule}", pattern=f"-(?:{PIPELINED_PATTERN})",
                         read=lambda suffix: suffix[1:]),
    model_needs="linear_aggregation", precompute="published", aggregates_first=True,
    performance=PerformanceTerms("pipegcn", "boundary", pipelined=True))
