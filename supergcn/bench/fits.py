"""The machine parameters of the performance model, fitted to ``supergcn bench comm`` sweeps.

:func:`fit_exchange` fits ``c + (P - 1) (L + m / BW)`` to the Alltoallv sweeps: ``c`` is
the cost of one call whatever P (posting and completing it from Python), told apart from
the per-peer L only by sweeps at several P. :func:`fit_quantization` fits
``a + values x (4 + b/8) / TH`` to each half of the quantization sweep: ``a`` is its cost
per exchange at any size. :func:`fit_dense` fits ``g + flops / TH_g`` to GEMMs timed at
several sizes (:func:`supergcn.perf.machines.dense_sweep`). Fits minimise relative
error, so small and large sizes count alike, with no coefficient below zero.
"""

from __future__ import annotations

import numpy as np

from supergcn.errors import SuperGCNError


def _relative_nnls(design: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    """Non-negative coefficients of ``seconds ~ design @ coefficients``, least squares on
    the relative error."""
    from scipy.optimize import nnls

    seconds = np.asarray(seconds, dtype=np.float64)
    coefficients, _ = nnls(design / seconds[:, None], np.ones_like(seconds))
    return coefficients


def fit_latency_bandwidth(peers, bytes_per_peer, seconds, per_call: bool = False) -> dict:
    """``call_s``, ``latency_s`` and ``bandwidth_bytes_per_s`` of
    seconds = call + peers (L + bytes_per_peer / BW); ``call_s`` is 0 unless ``per_call``
    (it needs sweeps at several peer counts to be told apart from L)."""
    peers = np.asarray(peers, dtype=np.float64)
    sizes = np.asarray(bytes_per_peer, dtype=np.float64)
    columns = [peers, peers * sizes]
    if per_call:
        columns.insert(0, np.ones_like(peers))
    coefficients = _relative_nnls(np.stack(columns, axis=1), seconds)
    call = coefficients[0] if per_call else 0.0
    latency, inverse_bandwidth = coefficients[-2:]
    if inverse_bandwidth <= 0 or call + latency <= 0:
        raise SuperGCNError(f"the all-to-all timings do not fit c + peers (L + bytes / BW) (c = {call:.3g} s, "
                            f"L = {latency:.3g} s, 1 / BW = {inverse_bandwidth:.3g} s/B)",
                            "rerun `supergcn bench comm` on an idle machine")
    return {"call_s": float(call), "latency_s": float(latency), "bandwidth_bytes_per_s": float(1.0 / inverse_bandwidth)}


def fit_exchange(results: list[dict]) -> dict:
    """:func:`fit_latency_bandwidth` jointly over the Alltoallv sweeps of ``bench comm``
    results (with a per-call cost when they span several P)."""
    peers, sizes, seconds = [], [], []
    for result in results:
        for point in result["alltoallv"]:
            peers.append(result["num_ranks"] - 1)
            sizes.append(point["bytes_per_peer"])
            seconds.append(point["seconds"])
    return fit_latency_bandwidth(peers, sizes, seconds, per_call=len({result["num_ranks"] for result in results}) > 1)


def fit_quantization(result: dict) -> dict:
    """Per half of a ``bench comm`` result's quantization sweep, ``<half>_call_s`` and
    ``<half>_bytes_per_s`` of seconds = call + values (4 + b/8) / TH."""
    from supergcn.kernels.wire import FP32_BYTES

    sweep = result["quantization"]
    moved = np.array([point["values"] for point in sweep["sweep"]]) * (FP32_BYTES + sweep["bits"] / 8)
    fit = {}
    for half, name in (("quantize", "quantization"), ("dequantize", "dequantization")):
        seconds = np.array([point[f"{half}_seconds"] for point in sweep["sweep"]])
        call, inverse_throughput = _relative_nnls(np.stack([np.ones_like(moved), moved], axis=1), seconds)
        if inverse_throughput <= 0:
            raise SuperGCNError(f"the {half} timings do not grow with the rows (call {call:.3g} s)",
                                "rerun `supergcn bench comm` on an idle machine")
        fit.update({f"{half}_call_s": float(call), f"{name}_bytes_per_s": float(1.0 / inverse_throughput)})
    return fit


def fit_dense(sweep: list[dict]) -> dict:
    """``dense_call_s`` (g) and ``dense_flops_per_s`` (TH_g) of seconds = g + flops / TH_g
    over GEMMs timed at several sizes.

    Args:
        sweep: one ``{"flops", "seconds"}`` per timed size.

    Returns:
        The two attributes.

    Raises:
        SuperGCNError: the timings do not grow with the flops.
    """
    flops = np.array([point["flops"] for point in sweep], dtype=np.float64)
    seconds = np.array([point["seconds"] for point in sweep])
    call, inverse_throughput = _relative_nnls(np.stack([np.ones_like(flops), flops], axis=1), seconds)
    if inverse_throughput <= 0:
        raise SuperGCNError(f"the GEMM timings do not grow with the flops (call {call:.3g} s)",
                            "rerun `supergcn perf profile` on an idle machine")
    return {"dense_call_s": float(call), "dense_flops_per_s": float(1.0 / inverse_throughput)}
