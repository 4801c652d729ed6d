"""``supergcn perf profile``: write a machine profile, from the config or measured here."""

from __future__ import annotations

from pathlib import Path

from supergcn.cli._args import output_file, positive_int
from supergcn.errors import SuperGCNError

HELP = "write a machine profile (from the config, or measured here)"


def configure(parser) -> None:
    parser.add_argument("--name", required=True, help="machine name")
    parser.add_argument("--entry", help="the profile as a JSON object (latency_us, bandwidth_gb_per_s, "
                        "quantization_gb_per_s, aggregation_gb_per_s, ...)")
    parser.add_argument("--comm", nargs="*", type=Path, default=[], help="`supergcn bench comm --json` results")
    parser.add_argument("--graph", type=Path, help="graph for the aggregation throughput (with --comm)")
    parser.add_argument("--features", type=positive_int, default=256)
    parser.add_argument("--threads", type=positive_int, default=1)
    parser.add_argument("--out", required=True, type=output_file)


def run(args) -> None:
    """Save :meth:`MachineProfile.from_config` of ``--entry``, or the profile measured from
    ``--comm`` results and this machine's kernels (:func:`supergcn.perf.machines.measured_profile`)."""
    from supergcn.data.storage import read_json
    from supergcn.perf import machines
    from supergcn.perf.prediction import MachineProfile

    if (args.entry is None) == (not args.comm):
        raise SuperGCNError("no profile to write",
                            "give either --entry (a profile from the config) or --comm (measured results)")
    if args.entry is not None:
        import json

        try:
            entry = json.loads(args.entry)
        except json.JSONDecodeError as exc:
            raise SuperGCNError(f"--entry is not JSON ({exc})", "pass the profile as a JSON object") from exc
        machines.save_profile(MachineProfile.from_config(args.name, entry), args.out)
        return
    if args.graph is None:
        raise SuperGCNError("--comm needs --graph", "pass the graph whose aggregation throughput is measured")
    results = [read_json(path, "bench comm result") for path in args.comm]
    profile, measurements = machines.measured_profile(results, args.graph, args.features, args.threads, args.name)
    machines.save_profile(profile, args.out, measurements)
