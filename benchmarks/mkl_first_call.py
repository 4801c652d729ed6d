"""The first multithreaded call of torch's MKL vector math, with and without the settling.

    .venv/bin/python benchmarks/mkl_first_call.py [--processes 40] [--threads 2] [--elements 65536]

Starts ``--processes`` fresh Python processes of each kind, alternating: ``raw`` sets
torch's threads with ``torch.set_num_threads``, ``settled`` with the trainer's
``set_threads`` (which first calls each MKL VML op once on one element,
:func:`supergcn.distributed.threads.settle_mkl_vml_dispatch`). Each process then takes
``torch.sqrt`` of the same ``--elements`` float32 values twice on ``--threads`` threads
(the op Adam's step runs on its second moment) and reports whether the first call's bits
equal the second's, and the first call's largest relative error against float64's square
root. oneMKL 2024.2 can run a low-accuracy kernel on one thread's chunk of a process's
first VML call (pytorch/pytorch#188792); how often depends on timing, so compare the two
kinds within one run.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys

import torch

CHILD = r"""
import json, sys
import numpy as np, torch
kind, threads, elements = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if kind == "settled":
    from supergcn.distributed.threads import set_threads
    set_threads(threads)
else:
    torch.set_num_threads(threads)
values = np.random.default_rng(0).random(elements, dtype=np.float32) + np.float32(0.5)
x = torch.from_numpy(values)
first = torch.sqrt(x)
second = torch.sqrt(x)
error = np.abs(first.numpy().astype(np.float64) / np.sqrt(values.astype(np.float64)) - 1).max()
print(json.dumps({"same": bool(torch.equal(first, second)), "error": float(error)}))
"""


def mkl_version() -> str:
    """The MKL torch was built with, as ``torch.__config__.show()`` names it.

    Returns:
        Its version line, or "none" where torch has no MKL.
    """
    for line in torch.__config__.show().splitlines():
        if "Math Kernel Library" in line:
            return line.strip(" -")
    return "none"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=40, help="fresh processes of each kind")
    parser.add_argument("--threads", type=int, default=2, help="torch threads in each process")
    parser.add_argument("--elements", type=int, default=65536, help="float32 values per sqrt")
    args = parser.parse_args()
    print(f"torch {torch.__version__}; {mkl_version()}; {platform.processor() or platform.machine()}")
    counts = {"raw": [0, 0.0], "settled": [0, 0.0]}
    for _ in range(args.processes):
        for kind in counts:
            out = subprocess.run([sys.executable, "-c", CHILD, kind, str(args.threads), str(args.elements)],
                                 capture_output=True, text=True, check=True)
            result = json.loads(out.stdout)
            counts[kind][0] += not result["same"]
            counts[kind][1] = max(counts[kind][1], result["error"])
    for kind, (differed, error) in counts.items():
        print(f"{kind:8s} first call differed from the second in {differed} of {args.processes} processes;"
              f" largest relative error of a first call {error:.2e}")


if __name__ == "__main__":
    main()
