#!/usr/bin/env bash
# Strong scaling on a lent node that has a Python with torch, numba and PyG but no network
# (the device machine): installs the wheels in WHEELS (mpich, mpi4py, pymetis, cmeel-metis,
# cmeel-gklib, cmeel-mimalloc, cmeel; fetched beforehand with `pip download --no-deps`), then runs
# `benchmarks/training.py scaling` with the arguments given, its table also written to $OUT.
#
#   COMMIT=$(git rev-parse HEAD) WHEELS=.device OUT=/tmp/out bash benchmarks/lent_node.sh --models gat sage
#
# COMMIT is recorded as given: a copy of the tree sent to such a node may carry a stale .git.
set -euo pipefail
python=${PYTHON:-python3}
out=${OUT:-.}
"$python" -m pip install --quiet --no-index --no-deps "${WHEELS:-.device}"/*.whl
{
    date -u +%FT%TZ
    echo "commit ${COMMIT:-not given}"
    lscpu | grep -E "^(Model name|CPU\(s\)|Flags)" | cut -c1-200
    "$python" -c 'import torch, numba, mpi4py; print("torch", torch.__version__, "numba", numba.__version__,
                  "mpi4py", mpi4py.__version__)'
} | tee "$out/machine.txt"
PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} "$python" benchmarks/training.py scaling "$@" 2>&1 | tee "$out/scaling.txt"
