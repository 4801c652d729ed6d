"""The fits behind measured machine profiles, on timings made from known parameters."""

import numpy as np
import pytest

from supergcn.bench.fits import fit_exchange, fit_latency_bandwidth, fit_quantization
from supergcn.errors import SuperGCNError


def test_fit_recovers_latency_and_bandwidth():
    rng = np.random.default_rng(0)
    peers = np.repeat([1, 3, 7], 11)
    sizes = np.tile(8 * 4.0 ** np.arange(11), 3)
    seconds = peers * (5e-6 + sizes / 8e9) * rng.uniform(0.97, 1.03, len(sizes))
    fit = fit_latency_bandwidth(peers, sizes, seconds)
    assert fit["call_s"] == 0
    assert fit["latency_s"] == pytest.approx(5e-6, rel=0.05)
    assert fit["bandwidth_bytes_per_s"] == pytest.approx(8e9, rel=0.05)


def sweep_result(num_ranks, seconds_of):
    sizes = 8 * 4 ** np.arange(11)
    return {"num_ranks": num_ranks,
            "alltoallv": [{"bytes_per_peer": m, "seconds": seconds_of(num_ranks - 1, m)} for m in sizes]}


def test_a_per_call_cost_is_told_apart_from_latency_only_across_process_counts():
    # c = 30 us per call, L = 2 us per peer, BW = 10 GB/s.
    def truth(peers, size):
        return 30e-6 + peers * (2e-6 + size / 1e10)
    joint = fit_exchange([sweep_result(p, truth) for p in (2, 4, 8, 16)])
    assert joint["call_s"] == pytest.approx(30e-6, rel=1e-6)
    assert joint["latency_s"] == pytest.approx(2e-6, rel=1e-6)
    assert joint["bandwidth_bytes_per_s"] == pytest.approx(1e10, rel=1e-6)
    # At one P the two are one term: L there is c / (P - 1) + L.
    alone = fit_exchange([sweep_result(4, truth)])
    assert alone["call_s"] == 0 and alone["latency_s"] == pytest.approx(2e-6 + 30e-6 / 3, rel=1e-6)


def test_quantization_fit_recovers_each_half():
    # Int2 moves 4.25 bytes per value: quantize 50 us + 5 GB/s, dequantize 10 us + 20 GB/s.
    values = 256 * 64 * 4 ** np.arange(6)
    sweep = [{"rows": int(v) // 256, "values": int(v), "quantize_seconds": 50e-6 + v * 4.25 / 5e9,
              "dequantize_seconds": 10e-6 + v * 4.25 / 2e10} for v in values]
    fit = fit_quantization({"quantization": {"bits": 2, "sweep": sweep}})
    assert fit["quantize_call_s"] == pytest.approx(50e-6) and fit["quantization_bytes_per_s"] == pytest.approx(5e9)
    assert fit["dequantize_call_s"] == pytest.approx(10e-6)
    assert fit["dequantization_bytes_per_s"] == pytest.approx(2e10)


def test_fit_rejects_timings_that_shrink_with_size():
    with pytest.raises(SuperGCNError, match="do not fit"):
        fit_latency_bandwidth([1, 1, 1], [8, 8000, 8e6], [1e-3, 1e-4, 1e-5])
