"""docs/outputs.md cannot drift from the code: its commands run, its trees are the files
they write (and, for the logs, the logs the workflow's rules declare), and its example
manifests have the keys of the manifests they write."""

import json
import os
import platform
import re
import shlex
import subprocess
import sys

import pytest

from conftest import REPO, mpiexec

PAGE = (REPO / "docs" / "outputs.md").read_text()
#: A tree's entry: its depth (four characters a level) and its name, a directory's ending in /.
ENTRY = re.compile(r"^((?:│   |    )*)[├└]── (\S+)")


def trees() -> dict[str, set[str]]:
    """Every tree of the page (its ``text`` blocks): root -> its files' paths under it."""
    found = {}
    for block in re.findall(r"```text\n(.*?)```", PAGE, re.S):
        root, *lines = block.splitlines()
        path, files = [], set()
        for line in lines:
            entry = ENTRY.match(line)
            assert entry, f"not a tree entry: {line!r}"
            depth = len(entry.group(1)) // 4
            path[depth:] = [entry.group(2)]
            if not entry.group(2).endswith("/"):
                files.add("".join(path))
        found[root.split()[0]] = files
    return found


def commands() -> list[list[str]]:
    """The page's commands (its one ``bash`` block), each as its words."""
    (block,) = re.findall(r"```bash\n(.*?)```", PAGE, re.S)
    return [shlex.split(line) for line in block.replace("\\\n", " ").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The directory the page's commands ran in."""
    root = tmp_path_factory.mktemp("outputs")
    for words in commands():
        launcher = []
        if words[0] == "mpiexec":
            launcher, words = [mpiexec(), *words[1:3]], words[3:]
        assert words[0] == "supergcn", words
        result = subprocess.run([*launcher, sys.executable, "-m", "supergcn.cli", *words[1:]], cwd=root,
                                capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert result.returncode == 0, result.stderr
    return root


def test_every_tree_is_the_files_the_commands_write(written):
    drawn = {root: files for root, files in trees().items() if not root.endswith("logs/")}
    assert len(drawn) == 6
    for root, files in drawn.items():
        directory = written / root
        assert {str(path.relative_to(directory)) for path in directory.rglob("*") if path.is_file()} == files, root


def test_every_example_manifest_has_the_keys_of_the_one_written(written):
    examples = re.findall(r"```\{code-block\} json\n:caption: (\S+)(?: \((header|summary) line\))?\n\n(.*?)```",
                          PAGE, re.S)
    assert len(examples) == 5
    for path, line, example in examples:
        text = (written / path).read_text()
        if line:
            text = text.splitlines()[0 if line == "header" else -1]
        assert list(json.loads(example)) == list(json.loads(text)), path


def test_the_logs_trees_are_the_logs_the_rules_declare():
    """The data steps' logs under logs/, a study's under its results_root (results/ for the
    default study's)."""
    declared = {"logs/": set(), "results/logs/": set()}
    for rules in (REPO / "workflow" / "rules").glob("*.smk"):
        text = rules.read_text()
        declared["logs/"].update(re.sub(r"\{(\w+)\}", r"<\1>", path) for path in re.findall(r'\s"logs/([^"]+)"', text))
        declared["results/logs/"].update(re.sub(r"\{\{(\w+)\}\}", r"<\1>", path)
                                         for path in re.findall(r'f"\{RESULTS\}/logs/([^"]+)"', text))
    assert {root: files for root, files in trees().items() if root.endswith("logs/")} == declared


def test_the_run_header_says_whether_its_ranks_shared_cores(written):
    """The page's run: 2 ranks of one thread on this host, against the CPUs it may use."""
    header = json.loads((written / "results/runs/synthetic-small/P2/hybrid-fp32-nolp/seed0.jsonl")
                        .read_text().splitlines()[0])
    cpus = len(os.sched_getaffinity(0))
    assert header["cores_by_host"] == {platform.node(): cpus} and header["oversubscribed"] == (2 > cpus)
