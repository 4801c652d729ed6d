"""numba as the kernels run it (supergcn/kernels/jit.py): its threading layer, and cached
kernels compiled one process at a time."""

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import json, numba, torch
from supergcn.kernels.rounding import scaled_rounded
from supergcn.kernels.simd import kernel_target
scaled_rounded(torch.randn(64, 8), None)  # a parallel kernel: starts numba's threads
loaded = sorted({line.split()[-1] for line in open("/proc/self/maps") if "libgomp" in line})
print(json.dumps({"layer": numba.threading_layer(), "recorded": kernel_target()["threading_layer"],
                  "asked": str(numba.config.THREADING_LAYER), "libgomp": loaded}))
"""


def probe(**environment) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300,
                            env={**env, "NUMBA_NUM_THREADS": "2", **environment})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads the process's maps (Linux)")
def test_the_kernels_run_on_the_workqueue_layer_beside_torchs_openmp_alone():
    """Without the workqueue layer numba's default loads the system's libgomp where there is
    one, a second OpenMP runtime beside torch's (jit.py)."""
    found = probe()
    assert found["layer"] == found["recorded"] == "workqueue", found
    assert all("torch" in path for path in found["libgomp"]), found


def test_a_threading_layer_the_user_asks_for_is_kept():
    assert probe(NUMBA_THREADING_LAYER="workqueue")["asked"] == "workqueue"
    assert probe(NUMBA_THREADING_LAYER="default")["asked"] == "default"


# A kernel of its own (so no other test has its cache), written into a folder that the
# processes import it from; each waits for the others before its first call.
KERNEL = """
from supergcn.kernels.jit import njit, prange


@njit(parallel=True, cache=True)
def kernel(x):
    total = 0.0
    for i in prange(x.shape[0]):
        total += x[i] * x[i] - x[i] / (1.0 + x[i] * x[i])
    return total
"""
CALLER = """
import json, os, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
from lock_probe import kernel
open(os.path.join(sys.argv[1], f"ready-{os.getpid()}"), "w").close()
while len([n for n in os.listdir(sys.argv[1]) if n.startswith("ready-")]) < int(sys.argv[2]):
    time.sleep(0.01)
kernel(np.ones(8))
stats = kernel.stats
print(json.dumps({"compiled": sum(stats.cache_misses.values()), "loaded": sum(stats.cache_hits.values())}))
"""


def test_processes_calling_a_new_kernel_together_compile_it_once_and_load_it_otherwise(tmp_path):
    """jit.njit: one process compiles while the others wait on its lock, then load its cache
    (numba alone compiles it in each)."""
    (tmp_path / "lock_probe.py").write_text(KERNEL)
    processes = 3
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "NUMBA_NUM_THREADS": "2"}
    started = [subprocess.Popen([sys.executable, "-c", CALLER, str(tmp_path), str(processes)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(processes)]
    reports = []
    for process in started:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err[-3000:]
        reports.append(json.loads(out.splitlines()[-1]))
    assert sorted(report["compiled"] for report in reports) == [0] * (processes - 1) + [1], reports
    assert sorted(report["loaded"] for report in reports) == [0] + [1] * (processes - 1), reports
