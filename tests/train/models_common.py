"""What tests/train/test_models.py and its MPI job (models_job.py) agree on: the runs at
each P, by name, and the options every run shares."""

from supergcn.naming import GNN_MODELS, STRATEGIES

HIDDEN, LAYERS, HEADS, EPOCHS, LR, CLIP = 32, 3, 4, 5, 0.01, 0.05
PARTS = (1, 2, 3, 5, 7)
#: P of the runs that check one option each (the torch kernels, aggregating first, clipping).
OPTIONS_AT = 3
#: The models whose layers can aggregate before they transform (GAT projects first), and
#: those MixGCN's mixture of parallelism runs (element-wise aggregations).
AGGREGATING_FIRST = ("sage", "gcn", "gin")


def runs(parts: int) -> dict[str, dict]:
    """The job's runs at P = ``parts``: name -> the options of its ``TrainConfig`` beyond
    the shared ones. Every model under every strategy in FP32 (one strategy at P = 1,
    where they are the same run), Int2 GAT under hybrid, and at P = :data:`OPTIONS_AT`
    every model on torch's kernels, aggregating first, SAGE with clipped gradients and GAT
    with its exchanges not overlapped; at every P, MixGCN's mixture of parallelism for the
    models it runs (its row blocks the hybrid plan's parts, whose strategy it ignores)."""
    strategies = ("hybrid",) if parts == 1 else STRATEGIES
    chosen = {f"{model}-{strategy}": {"model": model, "strategy": strategy}
              for model in GNN_MODELS for strategy in strategies}
    chosen.update({f"{model}-mop": {"model": model, "strategy": "hybrid", "parallelism": "mop"}
                   for model in AGGREGATING_FIRST})
    if parts > 1:
        chosen["gat-hybrid-int2"] = {"model": "gat", "strategy": "hybrid", "bits": 2}
    if parts == OPTIONS_AT:
        chosen.update({f"{model}-hybrid-torch": {"model": model, "strategy": "hybrid", "kernel": "torch"}
                       for model in GNN_MODELS})
        chosen.update({f"{model}-hybrid-aggregate-first": {"model": model, "strategy": "hybrid",
                                                           "aggregate_first": True} for model in AGGREGATING_FIRST})
        chosen.update({f"sage-{strategy}-clipped": {"model": "sage", "strategy": strategy, "grad_clip": CLIP}
                       for strategy in STRATEGIES})
        chosen["gat-hybrid-sync"] = {"model": "gat", "strategy": "hybrid", "overlap": False}
    return chosen
