"""``supergcn bench comm`` and the (L, BW) fit behind machine profiles."""

import json

import numpy as np
import pytest

from supergcn.errors import SuperGCNError
from supergcn.perf.commbench import fit_latency_bandwidth

from conftest import run_mpi


def test_bench_comm_fits_latency_and_bandwidth(tmp_path):
    out = tmp_path / "comm.json"
    result = run_mpi(2, "bench", "comm", "--json", out)
    assert result.returncode == 0, result.stderr
    measured = json.loads(out.read_text())
    assert measured["num_ranks"] == 2 and measured["ping_pong_latency_s"] > 0
    sizes = [point["bytes_per_peer"] for point in measured["alltoallv"]]
    assert sizes == sorted(sizes) and sizes[-1] >= 2**23
    # 8 MiB per peer takes longer than 8 B: the sweep spans both regimes the fit needs.
    assert measured["alltoallv"][-1]["seconds"] > 10 * measured["alltoallv"][0]["seconds"]
    assert measured["fit"]["latency_s"] > 0 and measured["fit"]["bandwidth_bytes_per_s"] > 0


def test_fit_recovers_latency_and_bandwidth():
    rng = np.random.default_rng(0)
    peers = np.repeat([1, 3, 7], 11)
    sizes = np.tile(8 * 4.0 ** np.arange(11), 3)
    seconds = peers * (5e-6 + sizes / 8e9) * rng.uniform(0.97, 1.03, len(sizes))
    latency, bandwidth = fit_latency_bandwidth(peers, sizes, seconds)
    assert latency == pytest.approx(5e-6, rel=0.05)
    assert bandwidth == pytest.approx(8e9, rel=0.05)


def test_fit_rejects_timings_that_shrink_with_size():
    with pytest.raises(SuperGCNError, match="do not fit"):
        fit_latency_bandwidth([1, 1, 1], [8, 8000, 8e6], [1e-3, 1e-4, 1e-5])
