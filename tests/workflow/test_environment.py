"""The conda environment of the rules lists what the package needs to run its commands."""

import re
from importlib import metadata

import yaml

from conftest import REPO

#: PyPI names whose conda-forge package is named otherwise.
CONDA_NAMES = {"torch": "pytorch-cpu", "torch_geometric": "pytorch_geometric"}
#: Dependencies the Snakemake driver imports, never a rule's command.
DRIVER_ONLY = {"snakemake", "jsonschema"}


def requirement_name(requirement: str) -> str:
    return re.split(r"[<>=!;\[ ]", requirement, maxsplit=1)[0].strip()


def test_the_conda_environment_lists_every_runtime_dependency():
    # The installed package's requirements are pyproject.toml's; extras carry a marker.
    runtime = [r for r in metadata.requires("supergcn") if "extra ==" not in r]
    needed = {requirement_name(r) for r in runtime} - DRIVER_ONLY
    environment = yaml.safe_load((REPO / "workflow" / "envs" / "supergcn.yaml").read_text())["dependencies"]
    conda = {requirement_name(entry) for entry in environment if isinstance(entry, str)}
    pip = {requirement_name(entry) for block in environment if isinstance(block, dict) for entry in block["pip"]}
    missing = sorted(name for name in needed if CONDA_NAMES.get(name, name) not in conda and name not in pip)
    assert not missing, f"workflow/envs/supergcn.yaml lacks {missing}"
    assert "mpich" in conda, "the rules launch ranks with the environment's mpiexec"
