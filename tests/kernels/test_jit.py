"""numba as the kernels run it (supergcn/kernels/jit.py): its threading layer."""

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
