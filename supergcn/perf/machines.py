"""Machine profiles of the performance model as JSON files.

A profile comes from the config (Fugaku, ABCI, a user's cluster: values in µs and GB/s,
each with its source) or is measured here: the exchange and quantization terms fitted to
``supergcn bench comm`` sweeps at every measured P (:mod:`supergcn.bench.comm`), the
aggregation throughput from our kernel on a graph, single rank, and the dense layers'
GEMM throughput and call cost fitted to float32 GEMMs of a hidden layer's shape
(:func:`dense_sweep`), from a rank's few nodes at thousands of ranks to a large part.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from supergcn.bench.fits import fit_dense, fit_exchange, fit_quantization
from supergcn.data.storage import read_json, write_json
from supergcn.errors import SuperGCNError
from supergcn.kernels.wire import FP32_BYTES
from supergcn.perf.prediction import PROFILE_FIELDS, MachineProfile

PROFILE_FORMAT = "supergcn-machine/1"
#: Rows of the GEMMs :func:`dense_sweep` times.
DENSE_SWEEP_ROWS = (16, 64, 256, 1024, 4096, 16384)


def save_profile(profile: MachineProfile, path: str | Path, measurements: dict | None = None) -> None:
    write_json(Path(path), {"format": PROFILE_FORMAT, "name": profile.name, **profile.to_config(),
                            "measurements": measurements or {}})


def load_profile(path: str | Path) -> MachineProfile:
    entry = read_json(Path(path), "machine profile")
    if entry.get("format") != PROFILE_FORMAT:
        raise SuperGCNError(f"{path} is not a supergcn machine profile", "write it with `supergcn perf profile`")
    return MachineProfile.from_config(entry["name"], entry)


def dense_sweep(features: int, threads: int, repeats: int = 15) -> list[dict]:
    """The median seconds of one float32 GEMM of n x ``features`` rows by a ``features`` x
    ``features`` weight (a hidden layer's product) for each n of :data:`DENSE_SWEEP_ROWS`.

    Args:
        features: the layer's width.
        threads: torch's threads.
        repeats: timings per size, after one warm-up.

    Returns:
        One ``{"rows", "flops", "seconds"}`` per size, flops = 2 n features².
    """
    import torch

    torch.set_num_threads(threads)
    weight = torch.randn(features, features)
    sweep = []
    for rows in DENSE_SWEEP_ROWS:
        inputs = torch.randn(rows, features)
        torch.nn.functional.linear(inputs, weight)
        seconds = []
        for _ in range(repeats):
            started = time.perf_counter()
            torch.nn.functional.linear(inputs, weight)
            seconds.append(time.perf_counter() - started)
        sweep.append({"rows": rows, "flops": 2 * rows * features**2, "seconds": float(np.median(seconds))})
    return sweep


def _profile_entries(fit: dict) -> dict:
    """The profile attributes in a :mod:`supergcn.bench.comm` fit."""
    return {attribute: fit[attribute] for attribute in PROFILE_FIELDS.values() if attribute in fit}


def measured_at(results: list[dict]) -> str:
    """What a profile's description adds about the P it was measured at: which, and which
    of them had more ranks than cores (their timings include the wait for a core)."""
    crowded = [str(result["num_ranks"]) for result in results if result.get("oversubscribed")]
    said = f", at P = {', '.join(str(result['num_ranks']) for result in results)}"
    return said + (f"; P = {', '.join(crowded)} oversubscribed: more ranks than cores" if crowded else "")


def measured_profile(comm_results: list[dict], graph_dir: str | Path, features: int, threads: int,
                     name: str = "local") -> tuple[MachineProfile, dict]:
    """This machine's profile and the raw measurements behind it.

    At every measured P the profile keeps what was fitted there (the call cost folded into
    L, which one P cannot tell apart); elsewhere it uses (c, L, BW) fitted jointly over
    all P and the quantization measured at the smallest P."""
    from supergcn.bench.kernels import bench_kernels

    multi = sorted((result for result in comm_results if result["num_ranks"] > 1), key=lambda r: r["num_ranks"])
    if not multi:
        raise SuperGCNError("no `supergcn bench comm` result with 2 or more ranks",
                            "run it under mpiexec -n 2 or more")
    by_num_ranks = {result["num_ranks"]: _profile_entries({**fit_exchange([result]), **fit_quantization(result)})
                    for result in multi}
    kernels = bench_kernels(graph_dir, features, threads, with_pyg=False)
    dense = dense_sweep(features, threads)
    gathered = kernels["nnz"] * features * FP32_BYTES
    smallest = multi[0]
    profile = MachineProfile(
        name=name, **{**by_num_ranks[smallest["num_ranks"]], **_profile_entries(fit_exchange(multi))},
        aggregation_bytes_per_s=gathered / kernels["seconds"]["ours_forward"], **fit_dense(dense),
        description=f"this machine, measured ({threads} thread(s) per rank){measured_at(multi)}",
        sources={**dict.fromkeys(("call_us", "latency_us", "bandwidth_gb_per_s"),
                                 "supergcn bench comm: Alltoallv sweeps through the training exchange, "
                                 + (f"fitted jointly over P = {', '.join(str(r['num_ranks']) for r in multi)}"
                                    if len(multi) > 1 else
                                    f"at P = {smallest['num_ranks']} alone: the call cost is folded into L, which "
                                    "one P cannot tell apart")),
                 **dict.fromkeys(("quantization_gb_per_s", "quantize_call_us", "dequantization_gb_per_s",
                                  "dequantize_call_us"),
                                 f"supergcn bench comm: Int{smallest['quantization']['bits']} quantization sweep, "
                                 f"all {smallest['num_ranks']} ranks at once"),
                 "aggregation_gb_per_s": f"supergcn bench kernels on {Path(graph_dir).name}",
                 **dict.fromkeys(("dense_gflop_per_s", "dense_call_us"),
                                 f"float32 GEMMs of {DENSE_SWEEP_ROWS[0]}-{DENSE_SWEEP_ROWS[-1]} rows by a "
                                 f"{features} x {features} weight, fitted (supergcn.perf.machines.dense_sweep)")},
        by_num_ranks=by_num_ranks)
    measurements = {"comm": comm_results,
                    "kernels": {key: kernels[key] for key in ("nnz", "features", "threads", "seconds")},
                    "dense": dense}
    return profile, measurements
