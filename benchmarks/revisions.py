"""This checkout's kernels against another checkout's, interleaved in one process.

    git worktree add /tmp/before <commit>
    .venv/bin/python benchmarks/revisions.py --other /tmp/before [--dataset synthetic-arxiv] [--threads 2]

Separate processes on a shared machine drift by 10 % between runs (the dense layers'
unchanged GEMMs did, between two alternating ``supergcn train`` runs here), which hides
a kernel's few per cent. So both revisions run in one process, call after call: the other
checkout's ``supergcn/kernels/gather.py`` and ``activation.py`` are loaded under other
names beside this checkout's. The other gather is compiled with this checkout's
intrinsics (``kernels/simd.py``), under its own decorators (a fast-math flag on its
functions applies to every instruction of theirs, the intrinsics' included).

Printed per case: the median of ``--repeats`` interleaved rounds of each, their ratio,
and whether their outputs have the same bits: the gather forward then transpose with
SAGE's 1/deg row scale at F = 256 and 128 on the graph's CSR; the dropout -> LayerNorm ->
ReLU kernel forward and backward on N x 256 rows at dropout 0.5; GAT's fused attention
forward and backward (4 heads of 64, self loops added) on the same CSR, a third as many
rounds.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from training import SHARED

from supergcn.data.datasets import prepare_dataset
from supergcn.distributed.threads import set_threads


def load_other(checkout: Path, module: str):
    """``supergcn/kernels/<module>.py`` of ``checkout`` as a module of its own."""
    spec = importlib.util.spec_from_file_location(f"other_{module}", checkout / "supergcn" / "kernels" / f"{module}.py")
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = loaded  # dataclasses look their module up there
    spec.loader.exec_module(loaded)
    return loaded


def interleaved(calls: dict, repeats: int) -> dict:
    """Median seconds of each call, the calls taking turns ``repeats`` times after one
    warm-up call each."""
    for call in calls.values():
        call()
    times = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            started = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - started)
    return {name: statistics.median(values) for name, values in times.items()}


def report(case: str, seconds: dict, same_bits: bool) -> None:
    print(json.dumps({"case": case, "this_ms": round(seconds["this"] * 1e3, 2),
                      "other_ms": round(seconds["other"] * 1e3, 2),
                      "this_over_other": round(seconds["this"] / seconds["other"], 3), "same_bits": same_bits}))


def gathers(graph, other, repeats: int) -> None:
    import supergcn.kernels.gather as this

    indptr, indices, n = np.asarray(graph.indptr), np.asarray(graph.indices), graph.num_nodes
    scale = (1.0 / np.maximum(np.diff(indptr), 1)).astype(np.float32)
    for features in (256, 128):
        x = np.random.default_rng(0).standard_normal((n, features)).astype(np.float32)
        ops = {name: module.GatherCsr(indptr, indices, n) for name, module in (("this", this), ("other", other))}
        ops = {name: (op, op.transpose()) for name, op in ops.items()}
        outs = {name: np.empty((n, features), np.float32) for name in ops}

        def call(name):
            forward, transpose = ops[name]
            forward.matmul(x, out=outs[name], row_scale=scale)
            transpose.matmul(x, out=outs[name], accumulate=True, row_scale=scale)
        seconds = interleaved({name: (lambda name=name: call(name)) for name in ops}, repeats)
        report(f"gather forward + transpose, F = {features}", seconds, np.array_equal(outs["this"], outs["other"]))


def activations(rows: int, other, repeats: int) -> None:
    import supergcn.kernels.activation as this

    torch.manual_seed(0)
    x = torch.randn(rows, 256, requires_grad=True)
    norm, upstream = torch.nn.LayerNorm(256), torch.randn(rows, 256)
    results = {}

    def call(name, module):
        out = module.dropout_norm_relu(x, norm, 0.5, training=True, seed=1)
        results[name] = (out, *torch.autograd.grad(out, [x, norm.weight, norm.bias], upstream))
    seconds = interleaved({"this": lambda: call("this", this), "other": lambda: call("other", other)}, repeats)
    same = all(torch.equal(a, b) for a, b in zip(results["this"], results["other"]))
    report(f"dropout -> LayerNorm -> ReLU forward + backward, {rows} x 256", seconds, same)


def attentions(graph, other, repeats: int, heads: int = 4, width: int = 64) -> None:
    import supergcn.kernels.attention as this

    indptr, indices, n = np.asarray(graph.indptr), np.asarray(graph.indices), graph.num_nodes
    rows = np.repeat(np.arange(n), np.diff(indptr))
    not_loop = rows != indices
    entry_rows = np.concatenate([rows[not_loop], np.arange(n)])  # self loops, as GAT has them
    entry_sources = np.concatenate([indices[not_loop], np.arange(n)])
    rng = np.random.default_rng(0)

    def tensor(*shape):
        return torch.tensor(rng.standard_normal(shape), dtype=torch.float32, requires_grad=True)
    inputs = (tensor(n, heads, width), tensor(n, heads), tensor(n, heads), tensor(0, heads, width), tensor(0, heads),
              torch.zeros(0, heads))
    upstream = torch.tensor(rng.standard_normal((n, heads, width)), dtype=torch.float32)
    results = {}

    def call(name, module, csr):
        out = module.FusedAttention.apply(*inputs, csr, 0.2, True)[0]
        results[name] = (out, *torch.autograd.grad(out, inputs[:3], upstream))
    csrs = {name: module.AttentionCsr(entry_rows, entry_sources, n, n) for name, module in (("this", this),
                                                                                             ("other", other))}
    seconds = interleaved({"this": lambda: call("this", this, csrs["this"]),
                           "other": lambda: call("other", other, csrs["other"])}, repeats)
    same = all(torch.equal(a, b) for a, b in zip(results["this"], results["other"]))
    report(f"attention forward + backward, {heads} heads of {width}", seconds, same)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--other", type=Path, required=True, help="the other checkout (a git worktree)")
    parser.add_argument("--dataset", default="synthetic-arxiv")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    set_threads(args.threads)
    graph = prepare_dataset(args.dataset, SHARED)
    gathers(graph, load_other(args.other, "gather"), args.repeats)
    activations(graph.num_nodes, load_other(args.other, "activation"), args.repeats)
    attentions(graph, load_other(args.other, "attention"), max(3, args.repeats // 3))


if __name__ == "__main__":
    main()
