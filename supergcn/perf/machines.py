"""Machine profiles of the performance model as JSON files.

A profile comes from the config (Fugaku, ABCI, a user's cluster: values in µs and GB/s,
each with its source) or is measured here: (L, BW) fitted to ``supergcn bench comm``
Alltoallv sweeps at every measured P and jointly over all of them (the default at other
P), TH from the Int2 quantization benchmark and the aggregation throughput from our
kernel on a graph, single rank.
"""

from __future__ import annotations

from pathlib import Path

from supergcn.data.storage import read_json, write_json
from supergcn.errors import SuperGCNError
from supergcn.kernels.wire import FP32_BYTES
from supergcn.perf.commbench import fit_alltoallv
from supergcn.perf.model import MachineProfile

PROFILE_FORMAT = "supergcn-machine/1"


def save_profile(profile: MachineProfile, path: str | Path, measurements: dict | None = None) -> None:
    write_json(Path(path), {"format": PROFILE_FORMAT, "name": profile.name, **profile.to_config(),
                            "measurements": measurements or {}})


def load_profile(path: str | Path) -> MachineProfile:
    entry = read_json(Path(path), "machine profile")
    if entry.get("format") != PROFILE_FORMAT:
        raise SuperGCNError(f"{path} is not a supergcn machine profile", "write it with `supergcn perf profile`")
    return MachineProfile.from_config(entry["name"], entry)


def measured_profile(comm_results: list[dict], graph_dir: str | Path, features: int, threads: int,
                     name: str = "local") -> tuple[MachineProfile, dict]:
    """This machine's profile and the raw measurements behind it."""
    from supergcn.perf.kernelbench import bench_kernels, bench_quantization

    multi = [result for result in comm_results if result["num_ranks"] > 1]
    if not multi:
        raise SuperGCNError("no `supergcn bench comm` result with 2 or more ranks",
                            "run it under mpiexec -n 2 or more")
    latency, bandwidth = fit_alltoallv(multi)
    quantization = bench_quantization(rows=100_000, features=features, threads=threads, bits=2, rounding="nearest")
    # TH counts bytes read and written: float32 in, packed bits out (and the reverse).
    moved = quantization["float32_bytes"] + quantization["packed_bytes"]
    round_trip = quantization["seconds"]["quantize_pack"] + quantization["seconds"]["unpack_dequantize"]
    kernels = bench_kernels(graph_dir, features, threads, with_pyg=False)
    gathered = kernels["nnz"] * features * FP32_BYTES
    profile = MachineProfile(
        name=name, latency_s=latency, bandwidth_bytes_per_s=bandwidth,
        quantization_bytes_per_s=2 * moved / round_trip,
        aggregation_bytes_per_s=gathered / kernels["seconds"]["ours_forward"],
        description=f"this machine, measured ({threads} thread(s) per rank)",
        sources={"latency_us": "supergcn bench comm: Alltoallv sweep, fitted jointly over P",
                 "bandwidth_gb_per_s": "supergcn bench comm: Alltoallv sweep, fitted jointly over P",
                 "quantization_gb_per_s": "supergcn bench quantization (Int2, nearest)",
                 "aggregation_gb_per_s": f"supergcn bench kernels on {Path(graph_dir).name}"},
        by_num_ranks={result["num_ranks"]: fit_alltoallv([result]) for result in multi})
    measurements = {"comm": comm_results, "quantization": quantization,
                    "kernels": {key: kernels[key] for key in ("nnz", "features", "threads", "seconds")}}
    return profile, measurements
