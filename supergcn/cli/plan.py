"""``supergcn plan``: build the per-rank communication plans of a partition."""

from __future__ import annotations

from pathlib import Path

from supergcn.cli._args import output_dir
from supergcn.naming import STRATEGIES
from supergcn.options import add_arguments, values_given
from supergcn.plan.costs import SHAPE_OPTIONS, WIRE_OPTIONS
from supergcn.train.config import TrainConfig

HELP = "build per-rank communication plans"
#: The training options that set what a hybrid plan's rows cost.
COVER_OPTIONS = SHAPE_OPTIONS + WIRE_OPTIONS


def configure(parser) -> None:
    parser.add_argument("--graph", required=True, type=Path, help="prepared graph directory")
    parser.add_argument("--partition", required=True, type=Path, help="partition directory of that graph")
    parser.add_argument("--strategy", required=True, choices=STRATEGIES, help="how cut edges are served")
    parser.add_argument("--out", required=True, type=output_dir, help="output plan directory")
    # The model the hybrid cover is for: GAT's PRE rows cost more than its POST rows
    # (supergcn.plan.costs); the others' cost the same, and the cover takes the fewest rows.
    from supergcn.models import weighted_cover_models
    from supergcn.naming import GNN_MODELS

    weighted = ", ".join(weighted_cover_models())
    alike = ", ".join(name for name in GNN_MODELS if name not in weighted_cover_models())
    parser.description = (f"{HELP}. The model options below weigh the cover of a hybrid plan for {weighted} only, "
                          f"whose PRE and POST rows cost differently; for {alike} they change nothing: the cover "
                          "takes the fewest rows.")
    add_arguments(parser, TrainConfig, only=COVER_OPTIONS, groups={
        "model": f"the model a hybrid cover is weighed for ({weighted} only)",
        "exchange": f"the wire format of the rows it weighs ({weighted} only)"})


def cover_costs(args, num_classes: int) -> tuple[int, int] | None:
    """The PRE and POST row costs of the hybrid cover for the model the options name
    (:func:`supergcn.plan.costs.row_costs`); None for the fewest rows.

    Raises:
        SuperGCNError: costs asked of another strategy, or for adaptive bits.
    """
    from supergcn.errors import SuperGCNError
    from supergcn.models import card
    from supergcn.plan.costs import row_costs
    from supergcn.train.config import default

    given = {name: value for name, value in values_given(args, TrainConfig).items() if name in COVER_OPTIONS}
    if given and args.strategy != "hybrid":
        raise SuperGCNError(f"--{next(iter(given)).replace('_', '-')} sets what the hybrid cover weighs, but the "
                            f"strategy is {args.strategy}", "leave the model options out, or plan --strategy hybrid")
    shape = {name: given.get(name, default(name)) for name in COVER_OPTIONS}
    model = card(shape.pop("model"))
    if not isinstance(shape["bits"], int) and model.weighted_cover:
        raise SuperGCNError(f"--bits {shape['bits']} gives each row its width while training, so no cover can be "
                            "weighted by them", "plan for the widest, --bits 8, or for --bits 32")
    return None if args.strategy != "hybrid" else row_costs(model, **shape, num_classes=num_classes)


def run(args) -> None:
    """Plan ``args.strategy`` for the partition and write ``args.out``
    (:func:`supergcn.plan.store.run_plan`); print the rows each strategy sends."""
    from supergcn.data.graph import load_graph, read_graph_meta
    from supergcn.data.storage import check_replaceable
    from supergcn.partition.store import load_partition
    from supergcn.plan.statistics import strategy_summary
    from supergcn.plan.store import PLAN_MANIFEST, plan_strategy_rows, run_plan

    check_replaceable(args.out, PLAN_MANIFEST)  # before the work, not after it
    meta = read_graph_meta(args.graph)
    graph = load_graph(args.graph, mmap=True)
    partition, part_manifest = load_partition(args.partition, meta["hash"], meta["num_nodes"])
    manifest = run_plan(graph, meta["hash"], partition, part_manifest["partition_hash"], args.strategy, args.out,
                        cover_costs(args, meta["num_classes"]))
    cover = manifest["cover"]
    weighed = ("" if cover is None or cover["pre_row_cost"] == cover["post_row_cost"] else
               f", its cover weighing a PRE row {cover['pre_row_cost']:,} to a POST row's {cover['post_row_cost']:,}")
    print(f"plan {args.strategy} for P={partition.num_parts} on {graph.name}{weighed} ({manifest['seconds']:.2f} s) "
          f"-> {args.out}")
    print(strategy_summary(plan_strategy_rows(args.out)[1]))
