"""SAR's sequential aggregation (``--sar``) against the one-shot exchange: the epoch it pays
for holding one peer's rows at a time, measured in one sitting.

    .venv/bin/python benchmarks/sar.py [--dataset synthetic-arxiv] [--parts 2 4] [--epochs 5]
        [--rounds 2] [--threads 1] [--hidden 256] [--model sage] [--out sar-epoch.json]

Prepares the graph (Cora, CiteSeer, Facebook from ``../shared/datasets``), its METIS
partition and post plan at each P, then, at each P, runs the one-shot exchange, ``--sar sa``
and ``--sar sar`` in turn, ``--rounds`` times (alternating, so a slow spell of the machine
falls on all three), ``--model`` (GraphSAGE; GAT: its softmax one peer at a time, and under
``sar`` the backward's refetches) at the paper's defaults, ``--threads`` per rank. It prints,
per P and mode, the mean epoch over every timed epoch of every round (each run's first
left out), its communication phase, the calls a rank makes per epoch (one Alltoallv per
aggregation and pass, or P - 1 steps), the largest peer's bytes held against what the
one-shot exchange holds, the time the refetches took (GAT under ``sar``), the largest rank's
peak resident memory, and each mode's epoch over the one-shot epoch. Memory at the products
scale is ``config/studies/sar-memory.yaml`` (GAT: ``sar-memory-gat.yaml``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
from training import prepare, run_supergcn

from supergcn.train.metrics import timed_epochs

MODES = ("off", "sa", "sar")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="synthetic-arxiv")
    parser.add_argument("--parts", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="threads per rank")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--model", default="sage", help="sage, gcn, gin or gat")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    report = []
    with tempfile.TemporaryDirectory(prefix="supergcn-sar-") as scratch:
        root = Path(scratch)
        prepare(root, args.dataset, args.parts, "post")
        for parts in args.parts:
            epochs = {mode: [] for mode in MODES}
            records = {}
            for round_ in range(args.rounds):
                for mode in MODES:
                    out = root / f"P{parts}-{mode}-{round_}.jsonl"
                    lines = run_supergcn(root, parts, args.threads, out, "--epochs", args.epochs, "--hidden",
                                         args.hidden, "--model", args.model,
                                         *(["--sar", mode] if mode != "off" else []))
                    header, summary = lines[0], lines[-1]
                    timed = timed_epochs([line for line in lines if line.get("type") == "epoch"])
                    epochs[mode] += timed
                    records[mode] = (header, timed[-1], summary)
            one_shot = np.mean([e["seconds"]["max"]["total"] for e in epochs["off"]])
            for mode in MODES:
                header, last, summary = records[mode]
                seconds = float(np.mean([e["seconds"]["max"]["total"] for e in epochs[mode]]))
                communication = float(np.mean([e["seconds"]["max"]["communication"] for e in epochs[mode]]))
                held = last.get("sequential_aggregation", {})
                refetch = float(np.mean([e.get("sequential_aggregation", {}).get("refetch_seconds", 0.0)
                                         for e in epochs[mode]]))
                row = {"P": parts, "mode": mode, "model": args.model, "epoch_seconds": seconds,
                       "communication_seconds": communication, "refetch_seconds": refetch,
                       "over_one_shot": seconds / one_shot, "bytes_sent": last["bytes"]["sent_total"],
                       "largest_peer_bytes": held.get("largest_peer_bytes"), "at_once_bytes": held.get("at_once_bytes"),
                       "peak_gib": max(summary["peak_memory_bytes_per_rank"]) / 2**30,
                       "oversubscribed": header["oversubscribed"]}
                report.append(row)
                print(f"P = {parts} {mode:<4} epoch {seconds:6.3f} s (communication {communication:6.3f} s, "
                      f"refetches {refetch:6.3f} s), "
                      f"{row['over_one_shot']:.2f}x one-shot; sent {row['bytes_sent'] / 2**20:.1f} MiB; held "
                      + ("every peer's rows" if mode == "off" else
                         f"{held['largest_peer_bytes'] / 2**20:.1f} of {held['at_once_bytes'] / 2**20:.1f} MiB")
                      + f"; peak {row['peak_gib']:.2f} GiB" + (" (oversubscribed)" if row["oversubscribed"] else ""),
                      flush=True)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
