"""The aggregation kernel side by side with the authors' and against its roofline.

    .venv/bin/python benchmarks/kernels.py --authors-ops /tmp/super_gnn/super_gnn/ops \\
        [--shapes papers100M-rank-8192 synthetic-small arxiv products] [--features 256 128] [--threads 2] [--runs 2]

Runs ``supergcn bench kernels`` (:func:`supergcn.bench.kernels.bench_kernels`) on each
synthetic shape and width, ``--runs`` times in one sitting, and prints one Markdown table:
per case and run, the authors' and our forward times, ours over theirs, the transpose
(backward) over the forward, ours over the roofline and the cache level the gathered
matrix fits in, with the level's bound. Without ``--authors-ops`` their columns stay
empty. Build the authors' kernel in a temporary folder, never in this project::

    git clone https://github.com/zhuangbility111/super_gnn /tmp/super_gnn
    cd /tmp/super_gnn/super_gnn/ops && /path/to/.venv/bin/python setup.py build_ext --inplace
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from supergcn.bench.kernels import SHAPES, bench_kernels


def row(result: dict) -> dict:
    seconds, ratios, bound = result["seconds"], result["ratios"], result["roofline"]
    return {"authors_ms": seconds.get("authors_forward", float("nan")) * 1e3,
            "ours_ms": seconds["ours_forward"] * 1e3,
            "ours_over_authors": ratios.get("ours_over_authors", float("nan")),
            "backward_over_forward": ratios["backward_over_forward"],
            "backward_over_authors": ratios.get("ours_backward_over_authors", float("nan")),
            "ours_over_roofline": ratios["ours_over_roofline"], "fits_in": bound["x_fits_in"],
            "ours_over_level_bound": ratios["ours_over_level_bound"],
            "identical": result.get("authors_max_abs_difference", float("nan")) == 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", choices=tuple(SHAPES), default=list(SHAPES))
    parser.add_argument("--features", type=int, nargs="+", default=[256, 128])
    parser.add_argument("--threads", type=int, nargs="+", default=[2])
    parser.add_argument("--runs", type=int, default=2, help="passes over every case, one after the other")
    parser.add_argument("--repeats", type=int, default=15, help="timed rounds per case and run")
    parser.add_argument("--authors-ops", type=Path, help="folder holding the authors' built supergnn_ops")
    parser.add_argument("--json", type=Path, help="write every result here")
    args = parser.parse_args()
    authors = None
    if args.authors_ops is not None:
        from supergcn.bench.authors import load_authors_ops

        authors = load_authors_ops(args.authors_ops)
    results = []
    for run in range(1, args.runs + 1):
        for shape in args.shapes:
            for features in args.features:
                for threads in args.threads:
                    result = bench_kernels(shape=shape, features=features, threads=threads, repeats=args.repeats,
                                           authors_ops=authors, with_references=False)
                    results.append({"run": run, **result})
                    print(f"run {run} {shape} F={features} T={threads}: {json.dumps(row(result))}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    print(f"\n{results[0]['compiled_for']}\n")
    print("| shape | F | threads | authors' ms | ours ms | ours ÷ authors' | backward ÷ forward | "
          "backward ÷ authors' backward | ours ÷ roofline | x fits in | ours ÷ level bound | same bits |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    cases = dict.fromkeys((r["graph"], r["features"], r["threads"]) for r in results)
    for case in cases:
        rows = [row(r) for r in results if (r["graph"], r["features"], r["threads"]) == case]

        def joined(key, digits=2):
            return " / ".join(f"{r[key]:.{digits}f}" for r in rows)
        print(f"| {case[0]} | {case[1]} | {case[2]} | {joined('authors_ms', 1)} | {joined('ours_ms', 1)} | "
              f"{joined('ours_over_authors')} | {joined('backward_over_forward')} | "
              f"{joined('backward_over_authors')} | {joined('ours_over_roofline')} | {rows[0]['fits_in']} | "
              f"{joined('ours_over_level_bound')} | {all(r['identical'] for r in rows)} |")


if __name__ == "__main__":
    main()
