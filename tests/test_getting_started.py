"""docs/getting-started.md's walk through the pipeline by hand runs as printed, and prints
what the page shows under each step: its commands, in a work folder of a fresh home, with
the venv on ``PATH`` as the page puts it there. Only the raw root changes, to the real
datasets' folder, where the page says it is where your raw files are."""

import os
import re
import subprocess

from conftest import BIN, REPO

PAGE = (REPO / "docs" / "getting-started.md").read_text()
#: The walk: from its heading to the study's (whose snakemake line the printed-commands
#: test runs).
WALK = PAGE.split("## By hand on Cora, every step", 1)[1].split("### The same as a study", 1)[0]
RAW_ROOT = "--raw-root data/raw"


def shape(line: str) -> str:
    """A printed line with its numbers blanked: times differ from run to run."""
    return re.sub(r"\d[\d,.]*", "#", line.strip())


def test_the_walk_by_hand_runs_as_printed_and_prints_what_the_page_shows(shared_datasets, tmp_path):
    script = "\n".join(re.findall(r"```bash\n(.*?)```", WALK, re.S))
    assert script.startswith("mkdir -p ~/supergcn-work && cd ~/supergcn-work\n")
    assert RAW_ROOT in script and "where your raw files are" in WALK
    script = script.replace(RAW_ROOT, f"--raw-root {shared_datasets}")
    # PyG keeps quiet under pytest (it reads PYTEST_CURRENT_TEST); a user's shell does not.
    env = {name: value for name, value in os.environ.items() if name != "PYTEST_CURRENT_TEST"}
    env.update(HOME=str(tmp_path), PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    printed = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    shown = [line for block in re.findall(r"```text\n(.*?)```", WALK, re.S) for line in block.splitlines()
             if line.strip() and line.strip() != "…"]
    # Every line printed is on the page, and every line on the page was printed.
    assert {shape(line) for line in printed} == {shape(line) for line in shown}, "\n".join(printed)
    # Each "where it wrote" line names what is there.
    work = tmp_path / "supergcn-work"
    for kind, extensions in (("tables", ("csv", "md", "tex")), ("figures", ("png", "pdf"))):
        (line,) = [line for line in printed if line.startswith(("wrote the tables ", "drew the figures "))
                   and kind in line.split()[2]]
        names, folder = re.match(r"\S+ the \S+ (.*) \(.*\) -> (\S+)$", line).groups()
        assert {path.name for path in (work / folder).iterdir()} == {
            f"{name}.{extension}" for name in names.split(", ") for extension in extensions}
    for line in printed:
        if line.startswith("trained "):
            assert (work / line.split(" -> ")[1]).is_file()
