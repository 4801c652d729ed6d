"""The ``supergcn`` command line: one sub-command per pipeline step.

Errors in the user's input are reported as one line, ``supergcn: error: ...``, with exit
status 2; outputs are written atomically, so a failed step leaves nothing behind.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from supergcn.errors import SuperGCNError

# Bytes of one quantization parameter (zero point or scale) on the wire.
PARAMETER_BYTES = {"bfloat16": 2, "float32": 4}


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def cmd_prepare(args) -> None:
    from supergcn.datasets import prepare_dataset
    from supergcn.graph import save_graph

    started = time.perf_counter()
    graph = prepare_dataset(args.dataset, raw_root=args.raw_root, seed=args.seed)
    meta = save_graph(graph, args.out, seconds=time.perf_counter() - started)
    print(f"prepared {meta['name']}: {meta['num_nodes']:,} nodes, {meta['num_edges_undirected']:,} undirected edges, "
          f"{meta['feature_dim']} features, {meta['num_classes']} classes, split {meta['split']} -> {args.out}")


def _load_graph_and_hash(directory):
    from supergcn.graph import load_graph, read_graph_meta

    meta = read_graph_meta(directory)
    return load_graph(directory, mmap=True), meta["hash"]


def cmd_partition(args) -> None:
    from supergcn.partition import run_partition

    graph, graph_hash = _load_graph_and_hash(args.graph)
    manifest = run_partition(graph, graph_hash, args.parts, args.out, args.constraints, args.seed)
    balance = ", ".join(f"{name} {value['imbalance_max_over_mean']:.3f}" for name, value in manifest["balance"].items()
                        if value["imbalance_max_over_mean"] is not None)
    print(f"partitioned {graph.name} into {args.parts}: edge cut {manifest['edge_cut']:,} of "
          f"{manifest['num_edges_undirected']:,}; max/mean {balance}; {manifest['seconds']:.2f} s -> {args.out}")


def cmd_plan(args) -> None:
    from supergcn.partition import load_partition
    from supergcn.plan import run_plan
    from supergcn.volume import strategy_summary

    graph, graph_hash = _load_graph_and_hash(args.graph)
    partition, part_manifest = load_partition(args.partition, graph_hash)
    manifest = run_plan(graph, graph_hash, partition, part_manifest["partition_hash"], args.strategy, args.out)
    print(f"plan {args.strategy} for P={partition.num_parts} on {graph.name} ({manifest['seconds']:.2f} s) -> {args.out}")
    print(strategy_summary(manifest))


def cmd_volume(args) -> None:
    from supergcn.volume import rows_table

    table = rows_table(args.plans)
    print(table.to_string(index=False))
    if args.csv:
        from supergcn.storage import write_text
        write_text(args.csv, table.to_csv(index=False))


def cmd_tables(args) -> None:
    from supergcn import results

    plans = []
    for item in args.plans:
        dataset, sep, directory = item.partition("=")
        if not sep:
            raise SuperGCNError(f"--plans takes DATASET=PLAN_DIR, got {item!r}")
        plans.append((dataset, directory))
    runs = results.runs_table(args.runs)
    out = args.out_dir
    write = results.write_table
    write(runs, out / "runs", "All training runs.")
    write(results.scaling_table(runs), out / "scaling",
          "Epoch time (s, max over ranks, mean over epochs after the first and over seeds), speed-up and "
          "parallel efficiency relative to the smallest P.")
    write(results.breakdown_table(runs), out / "breakdown", "Seconds per epoch by phase, of the slowest rank (mean over epochs after the first).")
    write(results.accuracy_table(runs), out / "accuracy",
          "Test accuracy (%) at the best-validation epoch, mean ± std over seeds.")
    if plans:
        write(results.volume_table(plans, args.hidden), out / "volume",
              f"Bytes exchanged by one layer at width {args.hidden}: pre / post / hybrid (FP32) and hybrid "
              "with Int2 data plus bfloat16 parameters.")


def cmd_figures(args) -> None:
    import pandas as pd

    from supergcn import results

    tables, out = args.tables_dir, args.out_dir
    runs = pd.read_csv(tables / "runs.csv")
    results.plot_scaling(pd.read_csv(tables / "scaling.csv"), out / "scaling")
    results.plot_breakdown(pd.read_csv(tables / "breakdown.csv"), out / "breakdown")
    results.plot_accuracy_curves(runs, out / "accuracy_curves")
    if (tables / "volume.csv").exists():
        results.plot_volume(pd.read_csv(tables / "volume.csv"), out / "volume")


def cmd_pjm(args) -> None:
    from supergcn.cluster import pjm

    if args.action == "submit":
        print(pjm.submit(args.jobscript, args.site, args.name, args.nodes, args.procs, args.threads,
                         args.elapse_minutes, args.log_dir))
    elif args.action == "status":
        print(pjm.status(args.job_id))
    else:
        pjm.cancel(args.job_ids)


def _add_pjm_parser(commands) -> None:
    pjm = commands.add_parser("pjm", help="Fujitsu PJM (Fugaku) wrappers for Snakemake's cluster-generic executor")
    actions = pjm.add_subparsers(dest="action", required=True)
    submit = actions.add_parser("submit", help="pjsub a Snakemake job script; prints the job id")
    submit.add_argument("--site", required=True, help="site file with a pjm: section (config/fugaku.yaml)")
    submit.add_argument("--name", default="supergcn")
    submit.add_argument("--nodes", type=_positive_int, required=True)
    submit.add_argument("--procs", type=_positive_int, required=True, help="MPI processes")
    submit.add_argument("--threads", type=_positive_int, required=True, help="threads per process")
    submit.add_argument("--elapse-minutes", type=_positive_int, required=True)
    submit.add_argument("--log-dir", default="logs/pjm")
    submit.add_argument("jobscript")
    status = actions.add_parser("status", help="print running / success / failed for a job id")
    status.add_argument("job_id")
    cancel = actions.add_parser("cancel", help="pjdel jobs")
    cancel.add_argument("job_ids", nargs="*")
    pjm.set_defaults(func=cmd_pjm)


def cmd_bench(args) -> int:
    import json

    from supergcn import bench

    if args.kind in ("comm", "exchange"):
        return _bench_mpi(args)
    if args.kind == "kernels":
        result = bench.run_bench_kernels(args)
    else:
        result = bench.bench_quantization(args.rows, args.features, args.threads, args.bits, args.rounding,
                                          args.repeats)
    print(json.dumps(result, indent=2))
    return 0


def _bench_mpi(args) -> int:
    """The MPI benchmarks: every rank measures, rank 0 prints and writes the result."""
    import json

    from mpi4py import MPI

    from supergcn import commbench
    from supergcn.ranks import agree, run_ranked
    from supergcn.storage import write_json

    def work(comm):
        if args.kind == "comm":
            result = commbench.bench_comm(comm)
        else:
            from supergcn.train import set_threads

            set_threads(args.threads)
            agree(comm, lambda: _check_plan_size(args.plan, comm.Get_size()))
            result = commbench.bench_exchange(comm, args.plan, args.features, args.bits, args.repeats,
                                              args.parameter_dtype == "bfloat16")
        if comm.Get_rank() == 0:
            print(json.dumps(result, indent=2))
            if args.json:
                write_json(args.json, result)

    return run_ranked(work, MPI.COMM_WORLD, f"bench {args.kind}")


def _check_plan_size(plan_dir: Path, size: int) -> None:
    from supergcn.plan import read_plan_manifest

    ranks = read_plan_manifest(plan_dir)["num_ranks"]
    if ranks != size:
        raise SuperGCNError(f"plan {plan_dir} is for {ranks} ranks, not {size}: run with mpiexec -n {ranks}")


def _add_bench_parser(commands) -> None:
    bench = commands.add_parser("bench", help="benchmarks")
    kinds = bench.add_subparsers(dest="kind", required=True)
    kernels = kinds.add_parser("kernels", help="our aggregation kernels vs PyG, torch.sparse.mm, scipy, memcpy",
                               description="Times are medians over --repeats calls after one warm-up call.")
    kernels.add_argument("--graph", required=True, type=Path, help="prepared graph directory")
    kernels.add_argument("--features", type=_positive_int, default=256, help="feature width F")
    kernels.add_argument("--threads", type=_positive_int, default=1, help="threads for every contender")
    kernels.add_argument("--repeats", type=_positive_int, default=5)
    kernels.add_argument("--reorder", choices=("none", "rcm"), default="none",
                         help="renumber nodes first (reverse Cuthill-McKee) to measure locality effects")
    kernels.add_argument("--no-pyg", action="store_true", help="skip PyG's scatter path (slow on big graphs)")
    kernels.add_argument("--json", type=Path, help="also write the result here")
    quant = kinds.add_parser("quantization", help="quantize+pack and unpack+dequantize throughput vs memcpy")
    quant.add_argument("--rows", type=_positive_int, default=200_000)
    quant.add_argument("--features", type=_positive_int, default=256)
    quant.add_argument("--threads", type=_positive_int, default=1)
    quant.add_argument("--bits", type=int, choices=(2, 4, 8), default=2)
    quant.add_argument("--rounding", choices=("nearest", "stochastic"), default="nearest")
    quant.add_argument("--repeats", type=_positive_int, default=5)
    comm = kinds.add_parser("comm", help="MPI ping-pong latency and Alltoallv time vs message size "
                            "(run under mpiexec -n P)",
                            description="Fits the performance model's latency L and bandwidth BW at this P.")
    comm.add_argument("--json", type=Path, help="also write the result here")
    exchange = kinds.add_parser("exchange", help="time one layer's boundary exchange of a plan "
                                "(run under mpiexec -n P)")
    exchange.add_argument("--plan", required=True, type=Path, help="plan directory")
    exchange.add_argument("--features", type=_positive_int, default=256, help="feature width F")
    exchange.add_argument("--bits", type=int, choices=(32, 8, 4, 2), default=32)
    exchange.add_argument("--parameter-dtype", choices=tuple(PARAMETER_BYTES), default="bfloat16",
                          help="wire type of the quantization parameters")
    exchange.add_argument("--threads", type=_positive_int, default=1, help="torch and numba threads per rank")
    exchange.add_argument("--repeats", type=_positive_int, default=20)
    exchange.add_argument("--json", type=Path, help="also write the result here")
    bench.set_defaults(func=cmd_bench)


def cmd_model(args) -> None:
    from supergcn import machines, modelstudy
    from supergcn.perfmodel import MachineProfile
    from supergcn.storage import read_json, write_json

    if args.action == "profile":
        if (args.entry is None) == (not args.comm):
            raise SuperGCNError("give either --entry (a profile from the config) or --comm (measured results)")
        if args.entry is not None:
            import json

            try:
                entry = json.loads(args.entry)
            except json.JSONDecodeError as exc:
                raise SuperGCNError(f"--entry is not JSON ({exc}): pass the profile as a JSON object") from exc
            machines.save_profile(MachineProfile.from_config(args.name, entry), args.out)
        else:
            if args.graph is None:
                raise SuperGCNError("--comm needs --graph, the graph whose aggregation throughput is measured")
            results = [read_json(path, "bench comm result") for path in args.comm]
            profile, measurements = machines.measured_profile(results, args.graph, args.features, args.threads,
                                                              args.name)
            machines.save_profile(profile, args.out, measurements)
    elif args.action == "predict":
        profiles = [machines.load_profile(path) for path in args.machine]
        document = modelstudy.predict(args.graph, args.partition, args.plan, profiles, args.hidden, args.num_layers,
                                      args.bits, PARAMETER_BYTES[args.parameter_dtype])
        write_json(args.out, document)
    elif args.action == "tables":
        validation = []
        for item in args.validation:
            parts = item.split("=", 2)
            if len(parts) != 3:
                raise SuperGCNError(f"--validation takes STRATEGY=PLAN_DIR=RESULT_JSON, got {item!r}")
            validation.append((parts[0], Path(parts[1]), Path(parts[2])))
        if validation and args.profile is None:
            raise SuperGCNError("--validation needs --profile, the measured profile of this machine")
        modelstudy.write_tables(args.predictions, validation, args.profile, args.out_dir)
    else:
        modelstudy.plot_study(args.tables_dir, args.out_dir)


def _add_model_parser(commands) -> None:
    model = commands.add_parser("model", help="the communication performance model and the plan-only study")
    actions = model.add_subparsers(dest="action", required=True)
    profile = actions.add_parser("profile", help="write a machine profile (from the config, or measured here)")
    profile.add_argument("--name", required=True, help="machine name")
    profile.add_argument("--entry", help="the profile as a JSON object (latency_us, bandwidth_gb_per_s, "
                         "quantization_gb_per_s, aggregation_gb_per_s, ...)")
    profile.add_argument("--comm", nargs="*", type=Path, default=[], help="`supergcn bench comm --json` results")
    profile.add_argument("--graph", type=Path, help="graph for the aggregation throughput (with --comm)")
    profile.add_argument("--features", type=_positive_int, default=256)
    profile.add_argument("--threads", type=_positive_int, default=1)
    profile.add_argument("--out", required=True, type=Path)
    predict = actions.add_parser("predict", help="predicted exchange and epoch times of one (graph, P)")
    predict.add_argument("--graph", required=True, type=Path)
    predict.add_argument("--partition", required=True, type=Path)
    predict.add_argument("--plan", required=True, type=Path, help="hybrid plan directory")
    predict.add_argument("--machine", nargs="+", required=True, type=Path, help="machine profile files")
    predict.add_argument("--hidden", type=_positive_int, default=256)
    predict.add_argument("--num-layers", type=_positive_int, default=3)
    predict.add_argument("--bits", type=int, nargs="*", choices=(8, 4, 2), default=[2])
    predict.add_argument("--parameter-dtype", choices=tuple(PARAMETER_BYTES), default="bfloat16",
                         help="wire type of the quantization parameters")
    predict.add_argument("--out", required=True, type=Path)
    tables = actions.add_parser("tables", help="the study's tables from predictions and measurements")
    tables.add_argument("--predictions", nargs="+", required=True, type=Path)
    tables.add_argument("--validation", nargs="*", default=[],
                        help="STRATEGY=PLAN_DIR=RESULT_JSON of `supergcn bench exchange` runs")
    tables.add_argument("--profile", type=Path, help="this machine's measured profile (for --validation)")
    tables.add_argument("--out-dir", required=True, type=Path)
    figures = actions.add_parser("figures", help="the study's figures from its tables")
    figures.add_argument("--tables-dir", required=True, type=Path)
    figures.add_argument("--out-dir", required=True, type=Path)
    model.set_defaults(func=cmd_model)


def cmd_train(args) -> int:
    from mpi4py import MPI

    from supergcn.ranks import run_ranked
    from supergcn.train import TrainConfig, train

    config = TrainConfig(**{field: getattr(args, field) for field in TrainConfig.__dataclass_fields__})
    return run_ranked(lambda comm: train(config, comm), MPI.COMM_WORLD, "train")


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    return value


def _label_rate(text: str) -> float:
    value = float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text}")
    return value


def _add_train_parser(commands) -> None:
    from supergcn.models import MODELS

    train = commands.add_parser("train", help="distributed full-batch training (run under mpiexec -n P)",
                                description="Run as `mpiexec -n P supergcn train ...`, P = the plan's rank count.")
    data = train.add_argument_group("inputs and outputs")
    data.add_argument("--graph", required=True, type=Path, help="prepared graph directory")
    data.add_argument("--partition", required=True, type=Path, help="partition directory of that graph")
    data.add_argument("--plan", required=True, type=Path, help="plan directory of that partition")
    data.add_argument("--out", required=True, type=Path, help="metrics file (JSON lines) to write")
    model = train.add_argument_group("model and optimisation (defaults: the paper's Table 2)")
    model.add_argument("--model", choices=MODELS, default="sage")
    model.add_argument("--num-layers", type=_positive_int, default=3)
    model.add_argument("--hidden", type=_positive_int, default=256)
    model.add_argument("--dropout", type=_non_negative_float, default=0.5)
    model.add_argument("--layer-norm", action=argparse.BooleanOptionalAction, default=True)
    model.add_argument("--lr", type=_non_negative_float, default=0.01)
    model.add_argument("--weight-decay", type=_non_negative_float, default=0.0)
    model.add_argument("--epochs", type=_positive_int, default=200)
    model.add_argument("--seed", type=int, default=0)
    run = train.add_argument_group("execution")
    run.add_argument("--threads", type=_positive_int, default=1, help="torch and numba threads per rank")
    run.add_argument("--kernel", choices=("numba", "torch"), default="numba",
                     help="sparse kernels: numba (optimised, default) or torch (torch.sparse.mm reference)")
    exchange = train.add_argument_group("boundary exchange while training (evaluation is always float32)")
    exchange.add_argument("--bits", type=int, choices=(32, 8, 4, 2), default=32,
                          help="32 = float32; 8, 4, 2 = per-row quantized embeddings and gradients")
    exchange.add_argument("--rounding", choices=("nearest", "stochastic"), default="nearest",
                          help="quantization rounding: nearest (upstream) or stochastic (unbiased, AdaQP)")
    exchange.add_argument("--parameter-dtype", choices=tuple(PARAMETER_BYTES), default="bfloat16",
                          help="wire type of the per-row zero point and scale")
    exchange.add_argument("--overlap", action=argparse.BooleanOptionalAction, default=True,
                          help="overlap the exchange with the local aggregation")
    model.add_argument("--label-rate", type=_label_rate, default=0.0,
                       help="masked label propagation: share of training labels fed as inputs each epoch "
                            "(0 = off; the paper uses 0.62)")
    model.add_argument("--input-norm", action=argparse.BooleanOptionalAction, default=False,
                       help="LayerNorm on the input features before the first layer")
    run.add_argument("--checkpoint", type=Path, help="checkpoint file (written atomically)")
    run.add_argument("--checkpoint-every", type=int, default=0, help="epochs between checkpoints (0 = never)")
    run.add_argument("--resume", action="store_true", help="continue from --checkpoint when it exists")
    run.add_argument("--init-weights", type=Path, help="state_dict to start from instead of the seeded init")
    run.add_argument("--save-model", type=Path, help="write the final state_dict here")
    run.add_argument("--save-logits", type=Path, help="write final log-probabilities (original node order)")
    # Fault injection for the tests of the abort path; not for users.
    run.add_argument("--fail-at-epoch", type=int, help=argparse.SUPPRESS)
    run.add_argument("--fail-rank", type=int, default=0, help=argparse.SUPPRESS)
    train.set_defaults(func=cmd_train)


def build_parser() -> argparse.ArgumentParser:
    from supergcn import __version__
    from supergcn.datasets import dataset_names
    from supergcn.partition import CONSTRAINTS
    from supergcn.plan import STRATEGIES

    parser = argparse.ArgumentParser(prog="supergcn", description="SuperGCN: distributed full-batch GNN training "
                                     "on CPU clusters, and the steps of its scaling pipeline.")
    parser.add_argument("--version", action="version", version=f"supergcn {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    prepare = commands.add_parser("prepare", help="build the canonical graph directory of a dataset",
                                  description=f"Datasets: {', '.join(dataset_names())}.")
    prepare.add_argument("dataset", help="dataset name")
    prepare.add_argument("--out", required=True, type=Path, help="output graph directory")
    prepare.add_argument("--raw-root", type=Path, default=Path("data/raw"),
                         help="where original dataset files are (or are downloaded to); default data/raw")
    prepare.add_argument("--seed", type=int, default=0, help="seed of generators and random splits")
    prepare.set_defaults(func=cmd_prepare)

    partition = commands.add_parser("partition", help="METIS-partition a prepared graph")
    partition.add_argument("--graph", required=True, type=Path, help="prepared graph directory")
    partition.add_argument("--parts", required=True, type=_positive_int, help="number of parts P (MPI ranks)")
    partition.add_argument("--out", required=True, type=Path, help="output partition directory")
    partition.add_argument("--constraints", nargs="*", choices=CONSTRAINTS, default=list(CONSTRAINTS),
                           help="balanced vertex weights (combined into one, see docs)")
    partition.add_argument("--seed", type=int, default=0, help="METIS random seed")
    partition.set_defaults(func=cmd_partition)

    plan = commands.add_parser("plan", help="build per-rank communication plans")
    plan.add_argument("--graph", required=True, type=Path, help="prepared graph directory")
    plan.add_argument("--partition", required=True, type=Path, help="partition directory of that graph")
    plan.add_argument("--strategy", required=True, choices=STRATEGIES, help="how cut edges are served")
    plan.add_argument("--out", required=True, type=Path, help="output plan directory")
    plan.set_defaults(func=cmd_plan)

    volume = commands.add_parser("volume", help="tabulate the communication volume of plans")
    volume.add_argument("plans", nargs="+", type=Path, help="plan directories")
    volume.add_argument("--csv", type=Path, help="also write the table as CSV")
    volume.set_defaults(func=cmd_volume)

    _add_train_parser(commands)
    _add_pjm_parser(commands)
    _add_bench_parser(commands)
    _add_model_parser(commands)

    tables = commands.add_parser("tables", help="result tables (CSV, Markdown, LaTeX) of a study")
    tables.add_argument("--runs", nargs="+", type=Path, required=True, help="metrics files of training runs")
    tables.add_argument("--plans", nargs="*", default=[], help="DATASET=PLAN_DIR for the volume table")
    tables.add_argument("--hidden", type=_positive_int, default=256, help="feature width of the volume table")
    tables.add_argument("--out-dir", type=Path, required=True)
    tables.set_defaults(func=cmd_tables)

    figures = commands.add_parser("figures", help="figures (PNG, PDF) from `supergcn tables` output")
    figures.add_argument("--tables-dir", type=Path, required=True)
    figures.add_argument("--out-dir", type=Path, required=True)
    figures.set_defaults(func=cmd_figures)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args) or 0
    except SuperGCNError as exc:
        print(f"supergcn: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
