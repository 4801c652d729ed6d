"""SAR's sequential aggregation (Mostafa, MLSys '22, "Sequential Aggregation and
Rematerialization: Distributed Full-batch Training of Graph Neural Networks on Large
Graphs"; code ``IntelLabs/SAR``): a rank fetches the rows it needs from one peer at a time,
adds that peer's share of the aggregation and frees the rows before fetching the next, so
the remote part of a layer's memory is the largest peer's rows, not the sum of all peers'.

With the rank's operators of :mod:`supergcn.distributed.rank_operators` (L the local CSR,
S the send operator, its rows grouped by destination, S_j those sent to peer j; R the
receive side's CSR, its columns grouped by source, R_j those of peer j's rows; D the row
scale), rank r at step k = 1 .. P-1 sends to peer r + k and receives from peer r - k
(mod P, a fixed ring order: the sums do not depend on timing), and a layer's aggregation is

    Y = D (L X + sum_k R_{r-k} B_{r-k}),    B_{r-k} = the rows S_r X of rank r - k,

and its backward, with G = dLoss/dY, in the same order with the messages reversed,

    dLoss/dX = L^T D G + sum_k S_{r+k}^T H_{r+k},    H_{r+k} = R_r^T D G of rank r + k.

Every step is one point-to-point exchange each way (``MPI_Isend``/``MPI_Irecv``), skipped
where the pair has no rows; the local product runs while the first peer's rows travel. A
step's received rows are freed before the next step's arrive, and its rows to send are
made from X when they are sent, so at most one peer's rows are alive at a time either
way; the exchange moves exactly the one-shot exchange's rows and gradients (the same bytes
per epoch), in P - 1 steps per aggregation instead of one Alltoallv.

The modes (``--sar``; SAR's docs, "SAR's training modes"):

* ``sa`` — sequential aggregation: the backward keeps what autograd keeps;
* ``sar`` — sequential aggregation and rematerialization: nothing of a peer is kept for
  the backward, which fetches again what it needs. A linear aggregation's backward needs
  none of the fetched rows (its gradient is R_j^T D G, which only the gradient sends back),
  so for SAGE, GCN and GIN the two modes are the same computation and the same bytes, and
  the run's header says so; SAR's rematerialization matters for attention, whose scores
  need the source rows in the backward.

Models: SAGE, GCN and GIN, whose aggregation is a row-scaled sum of rows
(:attr:`~supergcn.models.card.ModelCard.linear_aggregation`), and GAT, whose softmax over a
node's in-neighbours is taken one peer at a time as an online softmax
(:mod:`supergcn.methods.sar.attention`): under ``sar`` its backward fetches each peer's rows
and scores again and recomputes their scores (SAR's 4x memory case), under ``sa`` it keeps
them from the forward. GAT's sequential form takes the post plan, no attention dropout and
the numba kernels.

Plans: any for a sum of rows. SAR fetches the raw rows of the remote sources its nodes
need, the POST rows of a ``post`` plan (its published runs); a ``pre`` or ``hybrid`` plan's
PRE rows are partial sums over a peer's sources, which a sequential schedule takes one peer
at a time just as well: the aggregation is linear, so every plan trains the same model to
float rounding. Attention's PRE rows are softmax states weighted by the owner's scores, so
GAT takes the post plan (:mod:`supergcn.methods.sar.attention` says why). Evaluation passes
are sequential too (SAR's memory bound holds in inference).

Combinations refused, with their fix (GAT's above too): quantized rows (Int2/4/8, adaptive: SAR exchanges
float32 rows), bfloat16 rows (``--bits 16``) and compute, and every other method (a run is
one method: PipeGCN's staleness, BNS-GCN's sampling, MixGCN, DistGNN's delay, DistGNN-MB's
mini-batches). The sequential exchange of one rank: :mod:`supergcn.methods.sar.exchange`.
"""

from __future__ import annotations

from supergcn.methods.card import MethodCard, PerformanceTerms, VariantNaming
from supergcn.models import card
from supergcn.naming import DEFAULT_MODEL, GNN_MODELS
from supergcn.options import option

#: ``--sar``'s values: off, and SAR's two sequential modes with the names its tables give them.
SAR_MODES = {"sa": "SAR (SA)", "sar": "SAR"}
OFF = "off"


def _selected(values: dict) -> bool:
    return values.get("sar", OFF) in SAR_MODES


OPTIONS = (
    ("sar", "str", option(
        OFF, "SAR: fetch the rows of one peer at a time, add its share and free them before the next (fixed ring "
        "order, in both passes): sa keeps what autograd keeps, sar keeps nothing of a peer for the backward and "
        "fetches again what it needs (the same for a linear aggregation); off: the one-shot exchange",
        choices=(OFF, *SAR_MODES), group="sar", trajectory=True, read_when=_selected)),
)


def attends(model) -> bool:
    """Whether a model's aggregation is attention (its scalars travel as attention messages),
    which SAR takes one peer at a time as an online softmax.

    Args:
        model: its :class:`~supergcn.models.card.ModelCard`.

    Returns:
        Whether SAR's sequential softmax is its aggregation.
    """
    return any(message.kind == "attention" for message in model.messages)


def _plans(model) -> tuple[str, ...]:
    """Any plan for a sum of rows; the post plan's raw rows for attention."""
    return ("post",) if attends(model) else ("pre", "post", "hybrid")


def _conflicts(settings) -> list[str]:
    """A model SAR has no sequential form of; for attention, dropout on it (SAR's softmax draws
    none) and the torch kernels (it runs on the numba ones)."""
    model = card(settings.model)
    if not (model.linear_aggregation or attends(model)):
        taken = " or ".join(name for name in GNN_MODELS if card(name).linear_aggregation or attends(card(name)))
        return [f"--sar {settings.sar} (SAR) needs a sum of rows or an attention as the aggregation, which "
                f"{model.title}'s is not — use --model {taken} or --sar off"]
    found = []
    if attends(model) and settings.attention_dropout > 0:
        found.append(f"--sar {settings.sar} (SAR) takes {model.title}'s softmax one peer at a time and draws no "
                     "attention dropout — use --attention-dropout 0 or --sar off")
    if attends(model) and settings.kernel != "numba":
        found.append(f"--sar {settings.sar} (SAR) takes {model.title}'s softmax one peer at a time on the numba "
                     "kernels — use --kernel numba or --sar off")
    return found


def _published(values: dict) -> bool:
    """SAR's runs: float32 rows of a post plan (the remote sources' own rows), GraphSAGE, no label inputs."""
    return (values["bits"] == 32 and not values["label_propagation"] and values["model"] == DEFAULT_MODEL
            and values["strategy"] == "post")


CARD = MethodCard(
    name="sar", title="SAR", option="sar", selects=_selected, example={"sar": "sar"},
    run_name=lambda values: SAR_MODES[values["sar"]], published=_published, runtime="exchange",
    options=OPTIONS, options_title="SAR's sequential aggregation",
    naming=VariantNaming(key="sar", suffix=lambda mode: f"-{mode}", pattern="-(?:sar|sa)",
                         read=lambda suffix: suffix[1:]),
    model_strategies=_plans, precompute="refused", ignores=("overlap",), conflicts=_conflicts,
    header_key="sequential_aggregation",
    performance=PerformanceTerms("sar", "sequential"))
