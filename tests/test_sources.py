"""Rerun hashes derived from the code: a command's static import closure."""

import shutil
import subprocess
import sys

import pytest

from supergcn import sources
from supergcn.cli import command_names
from supergcn.naming import GNN_MODELS

from conftest import REPO


def closure(*entries, package_dir=sources.PACKAGE_DIR):
    return set(sources.import_closure(*entries, package_dir=package_dir))


def test_the_closure_follows_lazy_and_indirect_imports():
    train = closure("supergcn.cli.__main__", "supergcn.cli.train")
    # Imported inside functions (lazily) or only through other modules: the hand-written
    # lists these hashes replace missed each of them.
    for module in ("supergcn.distributed.ranks", "supergcn.train.provenance", "supergcn.kernels.jit",
                   "supergcn.kernels.wire", "supergcn.distributed.graph_ops", "supergcn.train.trainer"):
        assert module in train, module
    # Package __init__ modules run on the way.
    assert {"supergcn", "supergcn.cli", "supergcn.train", "supergcn.kernels"} <= train
    # What training does not run.
    assert not train & {"supergcn.report.figures", "supergcn.perf.study", "supergcn.cluster.pjm",
                        "supergcn.cli.prepare", "supergcn.cli.bench_comm"}


def test_relative_imports_resolve(tmp_path):
    package = tmp_path / "supergcn"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from . import leaf\n")
    (package / "sub" / "leaf.py").write_text("from ..other import thing\n")
    (package / "other.py").write_text("thing = 1\n")
    (package / "unused.py").write_text("")
    assert closure("supergcn.sub", package_dir=package) == {"supergcn", "supergcn.sub", "supergcn.sub.leaf",
                                                            "supergcn.other"}


@pytest.fixture
def package_copy(tmp_path):
    copy = tmp_path / "supergcn"
    shutil.copytree(sources.PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def edited_hashes(package_copy, relative_path, commands, edit="\n_EDITED = 1\n"):
    before = {command: sources.command_hash(command, package_dir=package_copy) for command in commands}
    path = package_copy / relative_path
    path.write_text(path.read_text() + edit)
    sources.source_hash.cache_clear()
    after = {command: sources.command_hash(command, package_dir=package_copy) for command in commands}
    return {command: before[command] != after[command] for command in commands}


def test_editing_a_module_imported_only_indirectly_changes_the_hash(package_copy):
    # cli/train -> train/trainer -> distributed/graph_ops -> distributed/rank_operators -> kernels/gather -> kernels/jit
    changed = edited_hashes(package_copy, "kernels/jit.py", ["train", "bench_exchange", "tables", "perf_figures"])
    assert changed == {"train": True, "bench_exchange": True, "tables": True, "perf_figures": False}


def test_editing_documentation_keeps_every_hash(package_copy):
    """Docstrings, comments and layout are not code: a study's jobs do not rerun for them."""
    def hashes():
        sources.source_hash.cache_clear()
        return {command: sources.command_hash(command, package_dir=package_copy) for command in ("train", "tables")}
    before = hashes()
    gather = package_copy / "kernels" / "gather.py"
    original = gather.read_text()
    edited = original.replace('"""Numba aggregation kernels', '"""The numba aggregation kernels', 1).replace(
        '    """Row boundaries of', '    # a comment\n\n    """Row\n    boundaries of', 1)
    assert edited.count("a comment") == 1 and "The numba" in edited
    gather.write_text(edited)
    jit = package_copy / "kernels" / "jit.py"
    jit.write_text(jit.read_text() + "\n# only a comment\n")
    assert hashes() == before


def test_editing_an_unrelated_module_keeps_the_hash(package_copy):
    changed = edited_hashes(package_copy, "report/figures.py", ["train", "bench_comm", "plan", "figures"])
    assert changed == {"train": False, "bench_comm": False, "plan": False, "figures": True}


def test_every_command_has_a_hash_and_unknown_ones_are_refused():
    hashes = {name: sources.command_hash(name) for name in command_names()}
    assert len(set(hashes.values())) == len(hashes)
    with pytest.raises(ValueError, match="no command module"):
        sources.command_hash("model_predict")


def test_the_closure_covers_every_module_a_command_really_imports(tmp_path):
    """Run `supergcn train` for an epoch; every package module loaded is in its closure."""
    from supergcn.data.datasets import prepare_dataset
    from supergcn.data.graph import save_graph
    from supergcn.partition.metis import partition_graph
    from supergcn.partition.store import run_partition
    from supergcn.plan.store import run_plan

    graph = prepare_dataset("synthetic-tiny")
    meta = save_graph(graph, tmp_path / "g")
    manifest = run_partition(graph, meta["hash"], 1, tmp_path / "p")
    run_plan(graph, meta["hash"], partition_graph(graph, 1), manifest["partition_hash"], "hybrid", tmp_path / "q")
    script = ("import sys\nfrom supergcn.cli import main\n"
              f"code = main(['train', '--graph', {str(tmp_path / 'g')!r}, '--partition', {str(tmp_path / 'p')!r}, "
              f"'--plan', {str(tmp_path / 'q')!r}, '--out', {str(tmp_path / 'm.jsonl')!r}, '--epochs', '1', "
              "'--hidden', '8'])\n"
              "print(code)\nprint(*sorted(m for m in sys.modules if m.split('.')[0] == 'supergcn'))\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert result.returncode == 0, result.stderr
    code, loaded = result.stdout.strip().splitlines()[-2:]
    assert code == "0"
    loaded = set(loaded.split())
    assert "supergcn.train.trainer" in loaded
    assert loaded <= closure("supergcn.cli.__main__", "supergcn.cli.train") | {"supergcn.cli.__main__"}


def test_parsing_the_workflow_imports_nothing_heavy():
    """The Snakefile and rule files import only light modules of the package (standard
    library, yaml and jsonschema), and those load no scientific library."""
    files = [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]
    imported = set()
    for path in files:
        for line in path.read_text().splitlines():
            words = line.split()
            if words[:1] in (["import"], ["from"]) and words[1].split(".")[0] == "supergcn":
                imported.add(words[1])
    assert imported == {"supergcn.naming", "supergcn.variants", "supergcn.models", "supergcn.options",
                        "supergcn.partition.config",
                        "supergcn.data.own_files",
                        "supergcn.plan.costs", "supergcn.sources", "supergcn.train.config", "supergcn.workflow_config",
                        "supergcn.cluster.slurm", "supergcn.train.precision"}
    probe = (f"import sys\nimport {', '.join(sorted(imported))}\n"
             "supergcn.models.weighted_cover_models()\n"
             "[supergcn.sources.command_hash(name) for name in ('train', 'tables', 'perf_predict')]\n"
             "print(*sorted(m for m in sys.modules if m.split('.')[0] in "
             "('torch', 'numpy', 'pandas', 'numba', 'scipy', 'mpi4py', 'matplotlib')))\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def test_every_import_by_name_is_followed():
    """A module that imports others by name hides them from the parser: each one is in
    :data:`~supergcn.sources.LOADED_BY_NAME` (the command dispatcher's, ``supergcn.cli``,
    names the commands, each hashed as its own entry point)."""
    calling = set()
    for path in sources.PACKAGE_DIR.rglob("*.py"):
        if "import_module(" in path.read_text():
            name = ".".join(("supergcn", *path.relative_to(sources.PACKAGE_DIR).with_suffix("").parts))
            calling.add(name.removesuffix(".__init__"))
    assert calling - {"supergcn.cli"} == set(sources.LOADED_BY_NAME)


def test_a_model_layer_is_in_the_closure_of_training_not_of_partitioning():
    training = sources.import_closure("supergcn.cli.train")
    assert {f"supergcn.models.{model}.layer" for model in GNN_MODELS} <= set(training)
    assert not any(name.startswith("supergcn.models.") for name in sources.import_closure("supergcn.cli.partition"))
