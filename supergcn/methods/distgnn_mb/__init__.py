"""DistGNN-MB's distributed mini-batch training (Vasimuddin et al., §3, Alg. 2):
``--batch-size B`` with the historical embedding cache and its asynchronous push.

Each rank trains mini-batches of its own training nodes, sampled on its own partition
(:mod:`supergcn.kernels.sampling` over :class:`~supergcn.methods.distgnn_mb.graph.PartitionGraph`):
solid sources bring their rows, halo sources (owned by other ranks, never expanded) take
theirs from the rank's cache of that layer (:class:`~supergcn.methods.distgnn_mb.cache.HistoricalEmbeddingCache`)
or, where the cache misses, are dropped from the batch with their edges. Step k of an epoch
of M steps:

1. sample the blocks from (seed, rank, epoch, k): layer l's destinations D_l draw
   ``fanouts[l]`` neighbours each;
2. if k ≥ d (``--hec-delay``), wait for the pushes started at step k − d and store what
   arrived in each layer's cache, stamped with the current step;
3. layer by layer: the layer's input is the previous layer's output on the solid sources
   (the input features at layer 0) and the cache's rows of the halo sources that hit;
   a miss's edges are removed, so the mean runs over the neighbours that remain,

       h_v^{l+1} = W_n · mean_{u ∈ N_l(v), u solid or hit} h_u^l + b + W_s · h_v^l

   for GraphSAGE; GAT's softmax runs over the same kept neighbours and v's own self loop
   (:mod:`supergcn.models.gat.block_attention`), its heads concatenated or averaged as
   over the full graph;

   if k < M − d and ``--hec-push`` nc > 0, for every peer j the layer's solid sources that
   are halos on j (``boundary[j]``) are candidates, up to nc of them are chosen by degree
   (:func:`~supergcn.methods.distgnn_mb.cache.select_push`) and their int64 ids and float32
   rows of ``h^l`` are sent to j with a nonblocking Alltoallv: Σ_j min(nc, candidates)·(8 + 4 d_l)
   bytes per layer (no gradient crosses ranks: cached rows are constants);
4. the loss, the NLL of the step's seeds summed and divided by the seeds of all ranks in
   the step, so that the summed gradient is that of the mean over the global batch;
   backward; the optimizer step every run takes (:class:`~supergcn.train.steps.OptimizerStep`:
   one all-reduce of the gradients and the loss, the clip, Adam).

The model is the full graph's (:class:`~supergcn.train.gnn.GNN`), run on the step's blocks:
each layer aggregates with its block's ops (:class:`~supergcn.methods.distgnn_mb.blocks.BlockOps`),
which bring the halo rows and start the push as the layer takes its input.

Every rank runs the same M = max over ranks of ⌈n_train / B⌉ steps (DistGNN-MB's code
all-reduces the count): a rank's batches are consecutive B of its training nodes in an
order shuffled each epoch from (seed, rank, epoch), wrapping around where it has fewer
batches (so each of its nodes is a seed at least once an epoch; a rank with fewer than B
takes all of them every step). Cache ages count steps over the whole run; pushes are
never in flight across epochs (none starts in an epoch's last d steps). Evaluation is the
exact full-graph model (:mod:`supergcn.train.trainer`), as for every variant.

It trains GraphSAGE or GAT (its paper's two models: a model whose layer runs on a block,
:attr:`~supergcn.models.card.ModelCard.trains_on_blocks`) on float32 rows with the plain
features as input, whatever the plan (the plan serves only the exact evaluation). The
room: the training (:mod:`~supergcn.methods.distgnn_mb.training`), a step's blocks and
their ops (:mod:`~supergcn.methods.distgnn_mb.blocks`), a rank's sampling graph
(:mod:`~supergcn.methods.distgnn_mb.graph`) and the cache
(:mod:`~supergcn.methods.distgnn_mb.cache`).
"""

from __future__ import annotations

import argparse
import re
from dataclasses import asdict, dataclass, fields

from supergcn.methods.card import MethodCard, VariantNaming
from supergcn.naming import DEFAULT_MODEL
from supergcn.options import Range, option

#: DistGNN-MB's settings beside the batch size, its paper's (§4.4): neighbours drawn per layer,
#: the input layer's first, lines of each layer's historical embedding cache (cs), rows pushed
#: to each peer per layer and step (nc), steps a line lives (ls) and steps after which a push
#: is stored (d).
DEFAULT_FANOUTS, HEC_SIZE, HEC_PUSH, HEC_LIFE, HEC_DELAY = "5,10,15", 1_000_000, 2000, 2, 1
#: Fan-outs as a study writes them: counts of at least 1, or -1 for every neighbour, comma-separated.
FANOUTS_PATTERN = r"(?:-1|[1-9][0-9]*)(?:,(?:-1|[1-9][0-9]*))*"
_COUNT, _FANOUT_WORD = "[1-9][0-9]*", "(?:all|[1-9][0-9]*)"
#: A mini-batch variant's suffix (:attr:`MiniBatch.suffix`): ``-mb<B>``, then each setting
#: that differs from its default, in the options' order: ``-fan<f1>_<f2>..`` (``all`` for
#: -1), ``-hec<lines>``, ``-push<nc>``, ``-life<steps>``, ``-delay<steps>``, ``-flush``.
MINIBATCH_PATTERN = (rf"-mb({_COUNT})(?:-fan({_FANOUT_WORD}(?:_{_FANOUT_WORD})*))?(?:-hec({_COUNT}))?"
                     rf"(?:-push(0|{_COUNT}))?(?:-life(0|{_COUNT}))?(?:-delay({_COUNT}))?(-flush)?")


def parse_fanouts(text: str) -> str:
    """Mini-batch fan-outs: neighbours drawn per layer, comma-separated, the input layer's
    first (DGL's order), each at least 1 or -1 for every neighbour.

    Args:
        text: the command line's text, e.g. ``5,10,15``.

    Returns:
        ``text``, checked.

    Raises:
        argparse.ArgumentTypeError: not a comma-separated list of such counts.
    """
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        counts = []
    if not counts or any(count < 1 and count != -1 for count in counts):
        raise argparse.ArgumentTypeError(f"fan-outs are counts >= 1 (or -1 for all), comma-separated, not {text!r}")
    return text


def _selected(values: dict) -> bool:
    return values.get("batch_size", 0) > 0


OPTIONS = (
    ("batch_size", "int", option(
        0, "DistGNN-MB: seed nodes per mini-batch on each rank, sampled on its own partition with halo rows from "
        "the historical embedding cache (0 = full-batch training)", values=Range(int, 0), group="distgnn_mb",
        trajectory=True, read_when=_selected)),
    ("fanouts", "str", option(
        DEFAULT_FANOUTS, "neighbours drawn per node and layer, comma-separated, the input layer's first as DGL orders "
        "them (-1 = all); one per layer", values=parse_fanouts, pattern=FANOUTS_PATTERN,
        pattern_message="fan-outs such as \"5,10,15\": a count of at least 1 (or -1, every neighbour) per layer, "
        "the input layer's first, comma-separated", group="distgnn_mb",
        trajectory=True, read_when=_selected)),
    ("hec_size", "int", option(HEC_SIZE, "lines of each layer's historical embedding cache", values=Range(int, 1),
                               group="distgnn_mb", trajectory=True, read_when=_selected)),
    ("hec_push", "int", option(HEC_PUSH, "embeddings each rank pushes to each peer per layer and step (0 = none: "
                               "local training)", values=Range(int, 0), group="distgnn_mb", trajectory=True,
                               read_when=_selected)),
    ("hec_life", "int", option(HEC_LIFE, "steps a cache line lives", values=Range(int, 0), group="distgnn_mb",
                               trajectory=True, read_when=_selected)),
    ("hec_delay", "int", option(HEC_DELAY, "steps after which a push is awaited and stored", values=Range(int, 1),
                                group="distgnn_mb", trajectory=True, read_when=_selected)),
    ("hec_flush", "bool", option(False, "empty every cache at the start of each epoch, as DistGNN-MB's published "
                                 "code does (its paper does not)", group="distgnn_mb", trajectory=True,
                                 read_when=_selected)),
)

#: How a variant's name spells a mini-batch setting that differs from its default
#: (:data:`MINIBATCH_PATTERN`), and how a name's word is read back.
_SUFFIX_WORDS = {
    "fanouts": ("fan", lambda value: "_".join("all" if int(c) == -1 else str(int(c)) for c in value.split(",")),
                lambda word: word.replace("all", "-1").replace("_", ",")),
    "hec_size": ("hec", str, int), "hec_push": ("push", str, int), "hec_life": ("life", str, int),
    "hec_delay": ("delay", str, int), "hec_flush": ("flush", lambda value: "", bool),
}


@dataclass(frozen=True)
class MiniBatch:
    """DistGNN-MB's settings of a mini-batch variant: ``supergcn train``'s options of its
    group (:data:`OPTIONS`, whose defaults these are), the seed nodes per mini-batch on each
    rank, the fan-outs and the historical embedding cache's lines, push, life, delay and flush."""

    batch_size: int
    fanouts: str = DEFAULT_FANOUTS
    hec_size: int = HEC_SIZE
    hec_push: int = HEC_PUSH
    hec_life: int = HEC_LIFE
    hec_delay: int = HEC_DELAY
    hec_flush: bool = False

    def changed(self) -> dict:
        """The settings besides the batch size that differ from their defaults.

        Returns:
            Option name -> value, in the options' order.
        """
        defaults = MiniBatch(self.batch_size)
        return {field.name: getattr(self, field.name) for field in fields(self)[1:]
                if getattr(self, field.name) != getattr(defaults, field.name)}

    def words(self) -> list[str]:
        """The changed settings as a variant's name spells them: ``push0``, ``fan10_all``, ``flush``.

        Returns:
            One word per changed setting, in the options' order.
        """
        return [prefix + spell(value) for name, value in self.changed().items()
                for prefix, spell, _ in [_SUFFIX_WORDS[name]]]

    @property
    def suffix(self) -> str:
        """The variant name's suffix (:data:`MINIBATCH_PATTERN`): ``-mb1000``, ``-mb64-push0``."""
        return "".join(f"-{word}" for word in [f"mb{self.batch_size}", *self.words()])

    @classmethod
    def from_suffix(cls, suffix: str) -> MiniBatch:
        """The settings a variant's suffix spells (the inverse of :attr:`suffix`).

        Args:
            suffix: a match of :data:`MINIBATCH_PATTERN`.

        Returns:
            The settings.
        """
        batch, *texts = re.fullmatch(MINIBATCH_PATTERN, suffix).groups()
        given = {name: read(text) for (name, (_, _, read)), text in zip(_SUFFIX_WORDS.items(), texts)
                 if text is not None}
        return cls(int(batch), **given)

    @classmethod
    def from_entry(cls, entry) -> MiniBatch:
        """The settings of a study variant's ``minibatch`` entry (or the settings themselves),
        fan-outs spelled as a study writes them.

        Args:
            entry: option name -> value, the batch size among them.

        Returns:
            The settings.
        """
        if isinstance(entry, cls):
            return entry
        given = dict(entry)
        if "fanouts" in given:
            given["fanouts"] = ",".join(str(int(count)) for count in str(given["fanouts"]).split(","))
        return cls(**given)


def _published(values: dict) -> bool:
    """DistGNN-MB's runs: float32, no label inputs, any plan (it samples its part of the graph;
    the plan serves only the exact evaluation) and either of its models."""
    return values["bits"] == 32 and not values["label_propagation"]


def _run_name(values: dict) -> str:
    """``DistGNN-MB``, with a model other than GraphSAGE and the settings off their defaults
    as a variant's name spells them: ``DistGNN-MB (gat, push0)``."""
    settings = MiniBatch.from_entry({name: values[name] for name in MiniBatch.__dataclass_fields__ if name in values})
    changed = [*([values["model"]] if values["model"] != DEFAULT_MODEL else []), *settings.words()]
    return "DistGNN-MB" + (f" ({', '.join(changed)})" if changed else "")


def _fanouts_per_layer(settings) -> list[str]:
    """One fan-out per layer."""
    counts = settings.fanouts.split(",")
    if len(counts) != settings.num_layers:
        return [f"--fanouts {settings.fanouts} gives {len(counts)} layers, the model has {settings.num_layers} — "
                "give one fan-out per layer"]
    return []



CARD = MethodCard(
    name="distgnn_mb", title="DistGNN-MB", option="batch_size", selects=_selected, run_name=_run_name,
    example={"batch_size": 1000},
    published=_published, runtime="training", options=OPTIONS,
    options_title="DistGNN-MB's mini-batch training with a historical embedding cache (--batch-size above 0)",
    naming=VariantNaming(key="minibatch", group=True, on={"minimum": 1}, value=MiniBatch.from_entry, options=asdict,
                         suffix=lambda settings: settings.suffix, pattern=MINIBATCH_PATTERN, read=MiniBatch.from_suffix,
                         after_model=True),
    model_needs="trains_on_blocks", plain_input=True, precompute="refused", ignores=("overlap",),
    conflicts=_fanouts_per_layer)
