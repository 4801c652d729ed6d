"""The roofline's passes and where the gathered matrix fits."""

import numpy as np
import pytest

from supergcn.bench import roofline
from supergcn.bench.kernels import roofline_figures
from supergcn.kernels.gather import GatherCsr


def test_pure_write_and_stream_read():
    out = np.zeros((50, 24), np.float32)
    chunks = GatherCsr(np.zeros(51, np.int64), np.zeros(0, np.int64), 1).chunks()
    roofline.pure_write(out, chunks, np.float32(3))
    assert np.all(out == 3)
    x = np.arange(50 * 24, dtype=np.float32).reshape(50, 24)
    sink = np.zeros(3, np.float32)
    roofline.stream_read(x, sink)
    assert sink.sum() == pytest.approx(x.sum(), rel=1e-6)


@pytest.mark.parametrize("nbytes, threads, level", [
    (40 * 2**10, 1, "L1"), (80 * 2**10, 2, "L1"),      # private caches add up over the threads' cores
    (3 * 2**20, 2, "L2"), (3 * 2**20, 1, "L3"),
    (100 * 2**20, 8, "L3"),                           # the shared L3 does not
    (200 * 2**20, 8, "memory"),
])
def test_cache_level(nbytes, threads, level):
    sizes = {"L1": 48 * 2**10, "L2": 2 * 2**20, "L3": 105 * 2**20}
    assert roofline.cache_level(nbytes, threads, sizes) == level


def test_roofline_adds_the_pure_passes():
    seconds = {"pure_gather": 0.2, "pure_write": 0.05, "stream_read": 0.1}
    figures = roofline_figures(seconds, gathered_bytes=4_000_000_000, output_bytes=500_000_000,
                               x_bytes=1_000_000_000, threads=2)
    assert figures["seconds"] == pytest.approx(0.25)
    assert figures["gather_gb_per_s"] == pytest.approx(20.0)
    assert figures["stream_read_gb_per_s"] == pytest.approx(10.0)
    # the gathered bytes at x's streaming rate (0.4 s) plus the output at the write rate (0.05 s)
    assert figures["level_bound_seconds"] == pytest.approx(0.45)
