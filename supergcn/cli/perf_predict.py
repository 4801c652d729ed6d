"""``supergcn perf predict``: the model's exchange and epoch times of one (graph, P, GNN model)."""

from __future__ import annotations

from pathlib import Path

from supergcn.cli._args import output_file, positive_int
from supergcn.naming import DEFAULT_PARAMETER_DTYPE, GNN_MODELS, NARROWER_BITS, PARAMETER_DTYPES
from supergcn.options import Range
from supergcn.perf.methods import DEFAULT_BOUNDARY_RATES
from supergcn.train.config import default

HELP = "predicted exchange and epoch times of one (graph, P, model)"


def configure(parser) -> None:
    parser.add_argument("--graph", required=True, type=Path)
    parser.add_argument("--partition", required=True, type=Path)
    parser.add_argument("--plan", required=True, type=Path,
                        help="the hybrid plan the model trains on (GAT's: `supergcn plan --model gat`)")
    parser.add_argument("--machine", nargs="+", required=True, type=Path, help="machine profile files")
    parser.add_argument("--model", choices=GNN_MODELS, default=default("model"))
    parser.add_argument("--hidden", type=positive_int, default=default("hidden"))
    parser.add_argument("--heads", type=positive_int, default=default("heads"), help="GAT's attention heads")
    parser.add_argument("--num-layers", type=positive_int, default=default("num_layers"))
    parser.add_argument("--bits", type=int, nargs="*", choices=NARROWER_BITS, default=[2],
                        help="widths predicted beside float32: 16 (bfloat16) or quantized 8, 4, 2")
    parser.add_argument("--parameter-dtype", choices=tuple(PARAMETER_DTYPES), default=DEFAULT_PARAMETER_DTYPE,
                        help="wire type of the quantization parameters")
    parser.add_argument("--boundary-rates", type=Range(float, 0, 1, what="a boundary rate"), nargs="+",
                        default=list(DEFAULT_BOUNDARY_RATES),
                        help="BNS-GCN's rates p predicted beside SuperGCN (with --model sage)")
    parser.add_argument("--aggregate-first", action="store_true",
                        help="every layer aggregates before it projects, as upstream (training's --aggregate-first)")
    parser.add_argument("--out", required=True, type=output_file)


def run(args) -> None:
    """Write :func:`supergcn.perf.study.predict`'s document to ``args.out``."""
    from supergcn.data.storage import write_json
    from supergcn.perf import machines, study

    profiles = [machines.load_profile(path) for path in args.machine]
    write_json(args.out, study.predict(args.graph, args.partition, args.plan, profiles, args.hidden, args.num_layers,
                                       args.bits, args.parameter_dtype, args.model, args.heads,
                                       args.boundary_rates, args.aggregate_first))
