"""What produced a result: package versions, host, git commit."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path


def package_versions() -> dict[str, str]:
    import mpi4py
    import numba
    import numpy
    import scipy
    import torch
    from mpi4py import MPI

    import supergcn

    return {"supergcn": supergcn.__version__, "python": platform.python_version(), "torch": torch.__version__,
            "numpy": numpy.__version__, "scipy": scipy.__version__, "numba": numba.__version__,
            "mpi4py": mpi4py.__version__, "mpi": MPI.Get_library_version().splitlines()[0].strip()}


def git_commit() -> str | None:
    """HEAD of the checkout holding this package (suffixed ``-dirty`` if modified), or None."""
    source = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=source, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=source,
                               capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def host() -> str:
    return platform.node()
