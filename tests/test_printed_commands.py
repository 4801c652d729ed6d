"""Every command printed in README.md, docs/, config/ and workflow/profiles/ works as
printed, so that none can rot unnoticed:

* each ``snakemake …`` line runs as a dry run (``-n``) from the repository root, with the
  venv's bin/ on PATH and an empty home folder, so no profile installed in the user's
  config folder can make it work (a fresh clone right after ``make run``);
* each ``supergcn …`` line (also under ``mpiexec`` and as ``python -m supergcn.cli``)
  names a command that answers ``--help`` and takes every option the line passes, and
  its launcher is on that PATH; ``python -m supergcn.<module>`` answers ``--help``;
* each ``make …`` line names a target of the Makefile (``make -n``).

Where a command is printed: in Markdown, the lines of fenced ``bash`` blocks (joined at a
trailing backslash) and inline code spans, which may wrap across lines; in the YAML files,
comment lines (joined at a trailing backslash) and inline code spans in comments; in the
other files under workflow/profiles/ (sbatch scripts), every line. A quoted message
(``supergcn <command>: error: …``) is no command.

What a page cannot print runnable is declared, each with why: here (SUBSTITUTIONS,
ENVIRONMENT, UNDRYABLE), or on the page:

* ``cat > NAME <<'EOF'`` in a fenced block writes NAME (into a temporary folder) for the
  page's commands;
* ``<!-- printed-commands: run by tests/FILE.py -->`` on the line before a fenced block
  says that test runs the block's ``snakemake`` lines (after making the files they need);
  FILE must exist and name the page. The block's other lines are still checked here.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from supergcn.cli import build_parser

from conftest import BIN, REPO, skip_where_the_shared_datasets_are_missing, snakemake_each

#: Placeholders printed where any value would do: the text printed -> what runs instead.
SUBSTITUTIONS = {
    # config/README.md's synopsis of an overlay command: any overlay stands for them.
    "OVERLAY.yaml [MORE.yaml ...]": "config/studies/paper-comparison.yaml",
}
#: Variables the printed commands read, with the values their context gives them.
ENVIRONMENT = {
    "SLURM_CPUS_PER_TASK": "2",  # set by Slurm inside the job of preprocess.sbatch
}
#: Snakemake options that need a finished study rather than a plan, and how many values
#: each takes: the line dry-runs without them (tests/workflow/test_workflow.py makes the
#: report of a finished study).
UNDRYABLE = {"--report": 1}

SHELL_LANGUAGES = {"bash", "sh", "shell", "console"}
FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*(?:\{code-block\}\s*)?([\w-]*)")
MARKER = re.compile(r"^\s*<!--\s*printed-commands:\s*run by (\S+)\s*-->\s*$", re.M)
SPAN = re.compile(r"(?<!`)`([^`]+)`(?!`)")
HEREDOC = re.compile(r"^cat\s*>\s*(\S+)\s*<<\s*'?(\w+)'?\s*$")
#: The programs whose printed commands are checked, and a command that starts with one
#: (after variable assignments, or as a path into a bin/ folder).
PROGRAMS = r"\b(?:snakemake|supergcn|mpiexec|mpirun|make|python3?)\b"
STARTS = re.compile(rf"^(?:\w+=\S*\s+)*(?:\S*bin/)?{PROGRAMS}(?:\s|$)")
#: A message a program prints, quoted: ``supergcn <command>: error: …``.
MESSAGE = re.compile(r"^(?:\S*/)?supergcn \S+:")
OPERATORS = {";", "&&", "||", "|", "&", "(", ")"}
PYTHONS = {"python", "python3"}
LAUNCHERS = {"mpiexec", "mpirun"}


@dataclass(frozen=True)
class Printed:
    """One simple command as a page prints it."""

    where: str                            # "docs/studies.md:187"
    argv: tuple[str, ...]
    files: tuple[tuple[str, str], ...] = ()  # (name, content) of the files the page writes
    run_by: str | None = None             # the test that runs it instead, from a marker


def simple_commands(text: str) -> list[tuple[str, ...]]:
    """The simple commands of one shell line: split at ``;``, ``&&``, ``|`` ..., comments,
    redirections and leading variable assignments dropped."""
    text = re.sub(r"\s\d*>>?&?\s*\S+|\s<\s+\S+", " ", text)
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()")
    lexer.whitespace_split = True
    commands, current = [], []
    for token in lexer:
        if token in OPERATORS:
            commands.append(current)
            current = []
        else:
            current.append(token)
    commands.append(current)
    stripped = []
    for argv in commands:
        while argv and re.match(r"^\w+=", argv[0]):
            argv = argv[1:]
        if argv:
            stripped.append(tuple(argv))
    return stripped


def commands_of(text: str, where: str, **extra) -> list[Printed]:
    """The printed commands of one logical line or code span: those of its simple commands
    that start with a program this test checks."""
    text = " ".join(text.split())
    for printed, runs in SUBSTITUTIONS.items():
        text = text.replace(printed, runs)
    if MESSAGE.match(text) or not re.search(PROGRAMS, text):
        return []
    try:
        commands = simple_commands(text)
    except ValueError as exc:  # prose in a code span, unless it starts like a command
        if STARTS.match(text):
            raise ValueError(f"{where}: `{text}` does not read as a shell command: {exc}") from exc
        return []
    return [Printed(where, argv, **extra) for argv in commands if STARTS.match(argv[0] + " ")]


def joined(lines: list[str], first: int) -> list[tuple[int, str]]:
    """(line number, logical line): lines ending in a backslash joined with the next."""
    logical, start, parts = [], None, []
    for number, line in enumerate(lines, first):
        start = number if start is None else start
        parts.append(line.rstrip().removesuffix("\\"))
        if not line.rstrip().endswith("\\"):
            logical.append((start, " ".join(parts)))
            start, parts = None, []
    if parts:
        logical.append((start, " ".join(parts)))
    return logical


def spans(lines: list[str], first: int, where: str, **extra) -> list[Printed]:
    """The commands of the inline code spans of ``lines`` (a span may wrap; not past a
    blank line)."""
    text = "\n".join(lines)
    found = []
    for match in SPAN.finditer(text):
        if "\n\n" not in match.group(1):
            line = first + text.count("\n", 0, match.start())
            found += commands_of(match.group(1), f"{where}:{line}", **extra)
    return found


def markdown_commands(path: Path) -> list[Printed]:
    """The commands a Markdown page prints (module docstring)."""
    where = path.relative_to(REPO).as_posix()
    lines = path.read_text().splitlines()
    prose, found, files, index = list(lines), [], {}, 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        mark = fence.group(1)
        end = next((j for j in range(index + 1, len(lines))
                    if set(lines[j].strip()) == {mark[0]} and len(lines[j].strip()) >= len(mark)), len(lines))
        before = next((line for line in reversed(lines[:index]) if line.strip()), "")
        marker = MARKER.search(before)
        if fence.group(2) in SHELL_LANGUAGES:
            body = lines[index + 1:end]
            heredoc = None
            for number, line in joined(body, index + 2):
                if heredoc is not None:
                    if line.strip() == heredoc[1]:
                        heredoc = None
                    else:
                        files[heredoc[0]] += line + "\n"
                    continue
                opened = HEREDOC.match(line.strip())
                if opened:
                    heredoc = opened.groups()
                    files[heredoc[0]] = ""
                    continue
                found += commands_of(line.strip().removeprefix("$ "), f"{where}:{number}",
                                     run_by=marker and marker.group(1))
        prose[index:end + 1] = [""] * (end + 1 - index)
        index = end + 1
    return [replace(printed, files=tuple(files.items())) for printed in found + spans(prose, 1, where)]


def commented_commands(path: Path) -> list[Printed]:
    """The commands a YAML file prints in its comments, or a script prints anywhere."""
    where = path.relative_to(REPO).as_posix()
    lines = path.read_text().splitlines()
    yaml = path.suffix == ".yaml"
    text = [re.sub(r"^\s*#+ ?", "", line) if line.lstrip().startswith("#") else ("" if yaml else line)
            for line in lines]
    found = []
    for number, line in joined(text, 1):
        found += commands_of(line.strip(), f"{where}:{number}")
    return found + spans(text, 1, where)


def pages() -> list[Path]:
    """The Markdown pages and the commented files of the checkout, build outputs left out."""
    def kept(path: Path) -> bool:
        return path.is_file() and not any(part.startswith(("_", ".")) for part in path.relative_to(REPO).parts)
    return sorted(path for path in (REPO / "README.md", *REPO.joinpath("docs").rglob("*.md"),
                                    *REPO.joinpath("config").rglob("*"), *REPO.joinpath("workflow/profiles").rglob("*"))
                  if kept(path))


def printed_commands() -> list[Printed]:
    found = []
    for path in pages():
        if path.suffix == ".md":
            found += markdown_commands(path)
        elif path.suffix in (".yaml", ".sbatch", ".sh") or path.parent.parent.name == "profiles":
            found += commented_commands(path)
    return found


PRINTED = printed_commands()


def program(argv: tuple[str, ...]) -> str:
    return Path(argv[0]).name


def kind(argv: tuple[str, ...]) -> str | None:
    """Which check a printed command gets: "snakemake", "supergcn" (also launched, or as
    ``python -m supergcn...``), "make", or none."""
    name = program(argv)
    if name in ("snakemake", "make", "supergcn"):
        return name
    if name in LAUNCHERS or name in PYTHONS and argv[1:2] == ("-m",) and argv[2].startswith("supergcn"):
        return "supergcn"
    return None


def unique(wanted: str) -> dict[tuple, list[Printed]]:
    """The printed commands of one kind, each command once, with every place it is printed;
    snakemake lines a marker hands to another test left out."""
    groups: dict[tuple, list[Printed]] = {}
    for printed in PRINTED:
        if kind(printed.argv) == wanted == "snakemake" and printed.run_by is None:
            groups.setdefault((printed.argv, printed.files), []).append(printed)
        elif kind(printed.argv) == wanted != "snakemake":
            groups.setdefault(printed.argv, []).append(printed)
    return groups


def environment(home: Path) -> dict[str, str]:
    """The test's environment: the venv's bin/ first on PATH (as `make run` and the docs
    ask), an empty home and config folder, and no profile named by the environment."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("SNAKEMAKE")}
    return {**env, "PATH": f"{BIN}:{os.environ['PATH']}", "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
            "OMP_NUM_THREADS": "1"}


def expand(token: str) -> str:
    """``$NAME`` and ``${NAME}`` from :data:`ENVIRONMENT`; an undeclared one fails."""
    def value(match):
        name = match.group(1) or match.group(2)
        assert name in ENVIRONMENT, f"${name} is not declared in ENVIRONMENT"
        return ENVIRONMENT[name]
    return re.sub(r"\$(?:\{(\w+)\}|(\w+))", value, token)


def dry_run_argv(argv: tuple[str, ...], written: dict[str, Path]) -> list[str]:
    """The printed snakemake command as a dry run: placeholders refused, variables and
    the page's written files filled in, options a dry run cannot take left out."""
    placeholders = [token for token in argv if re.search(r"<[^>]*>|\.\.\.|…", token)]
    assert not placeholders, (f"placeholder {placeholders}: print a runnable command, or declare what runs "
                              "instead in SUBSTITUTIONS")
    tokens, skip = [], 0
    for token in argv[1:]:
        if skip:
            skip -= 1
        elif token in UNDRYABLE:
            skip = UNDRYABLE[token]
        else:
            tokens.append(str(written.get(token, expand(token))))
    return ["snakemake", *tokens, "--dry-run", "--quiet"]


def read_files(argv: tuple[str, ...], files: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The files of ``files`` (name, content) that the command names. Snakemake reads no
    other: it runs in the repository with a home of its own, so a command printed twice
    with the same such files is one dry run."""
    return tuple((name, content) for name, content in files if name in argv)


SNAKEMAKE = unique("snakemake")


@pytest.fixture(scope="module")
def dry_runs(tmp_path_factory):
    """Every printed snakemake command run as a dry run, once for each (command, files it
    names) (:func:`read_files`), forked from one process that has started Snakemake
    (:func:`conftest.snakemake_each`): each run is mostly Snakemake's start-up. Returns
    each key's command as run and None, or the failure's output."""
    root = tmp_path_factory.mktemp("printed")
    distinct = list(dict.fromkeys((argv, read_files(argv, files)) for argv, files in SNAKEMAKE))
    commands, refused = {}, {}
    for index, (argv, files) in enumerate(distinct):
        home = root / f"run{index}"
        home.mkdir()
        written = {name: home / name for name, _ in files}
        for name, content in files:
            written[name].write_text(content)
        try:
            commands[argv, files] = (dry_run_argv(argv, written)[1:], environment(home / "home"), REPO)
        except AssertionError as exc:
            refused[argv, files] = str(exc)
    results = dict(zip(commands, snakemake_each(list(commands.values()), root / "output")))
    runs = {}
    for argv, files in SNAKEMAKE:
        key = (argv, read_files(argv, files))
        if key in refused:
            runs[argv, files] = (list(argv), refused[key])
        else:
            result = results[key]
            runs[argv, files] = (result.args, None if result.returncode == 0 else
                                 f"exit status {result.returncode}\n" + (result.stdout + result.stderr)[-4000:])
    return runs


@pytest.mark.parametrize("key", list(SNAKEMAKE), ids=[places[0].where for places in SNAKEMAKE.values()])
def test_every_printed_snakemake_command_dry_runs(key, dry_runs):
    command, failure = dry_runs[key]
    skip_where_the_shared_datasets_are_missing(failure or "")
    places = ", ".join(printed.where for printed in SNAKEMAKE[key])
    assert failure is None, f"printed at {places}: {shlex.join(key[0])}\nran: {shlex.join(command)}\n{failure}"


def command_of(argv: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(the supergcn command's words, the arguments after them) of a printed line, the
    launcher and ``python -m supergcn.cli`` taken off; None for a launcher named alone.
    A ``<placeholder>`` where a command's name goes stands for any: ``supergcn --help``."""
    while program(argv) in LAUNCHERS:
        inner = [index for index, token in enumerate(argv) if Path(token).name in ("supergcn", *PYTHONS)]
        if not inner:
            return None
        argv = argv[inner[0]:]
    arguments = argv[3:] if program(argv) in PYTHONS and argv[2] == "supergcn.cli" else argv[1:]
    words, parser = (), build_parser(arguments[:2])
    while True:
        commands = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
        rest = arguments[len(words):]
        if not commands or not rest or rest[0] not in commands[0].choices:
            break
        words, parser = (*words, rest[0]), commands[0].choices[rest[0]]
    assert not commands or not rest or re.match(r"-|<.*>$", rest[0]), \
        f"`supergcn {shlex.join(arguments)}`: no such command"
    return words, rest


SUPERGCN = unique("supergcn")


@pytest.fixture(scope="module")
def helps(tmp_path_factory):
    """``--help`` of every command the pages print (each command once)."""
    env = environment(tmp_path_factory.mktemp("home"))
    module_lines = {argv[:3] for argv in SUPERGCN if program(argv) in PYTHONS and argv[2] != "supergcn.cli"}
    commands = {command_of(argv)[0] for argv in SUPERGCN if argv[:3] not in module_lines and command_of(argv)}
    supergcn = shutil.which("supergcn", path=env["PATH"])
    asks = {words: [supergcn, *words, "--help"] for words in commands}
    # `python` and `.venv/bin/python` both mean the venv's interpreter.
    asks |= {argv: [str(BIN / "python"), *argv[1:], "--help"] for argv in module_lines}
    with ThreadPoolExecutor(max_workers=4) as pool:
        runs = {key: pool.submit(subprocess.run, ask, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
                for key, ask in asks.items()}
        return {key: future.result() for key, future in runs.items()}


@pytest.mark.parametrize("argv", list(SUPERGCN), ids=[places[0].where for places in SUPERGCN.values()])
def test_every_printed_supergcn_command_exists_with_its_options(argv, helps):
    places = ", ".join(printed.where for printed in SUPERGCN[argv])
    if program(argv) in LAUNCHERS:
        assert shutil.which(argv[0], path=f"{BIN}:{os.environ['PATH']}"), f"{places}: {argv[0]} is not on PATH"
    if program(argv) in PYTHONS and argv[2] != "supergcn.cli":
        result = helps[argv[:3]]
        assert result.returncode == 0, f"{places}: {shlex.join(argv[:3])} --help\n{result.stderr[-2000:]}"
        return
    if command_of(argv) is None:
        return
    words, arguments = command_of(argv)
    result = helps[words]
    assert result.returncode == 0, f"{places}: supergcn {' '.join(words)} --help\n{result.stderr[-2000:]}"
    offered = set(re.findall(r"--[\w-]+", result.stdout))
    passed = {re.match(r"\[?(--[\w-]+)", token).group(1) for token in arguments if re.match(r"\[?--\w", token)}
    assert passed <= offered, f"{places}: supergcn {' '.join(words)} takes no {sorted(passed - offered)}"


MAKE = unique("make")


@pytest.mark.parametrize("argv", list(MAKE), ids=[places[0].where for places in MAKE.values()])
def test_every_printed_make_command_names_a_target(argv):
    result = subprocess.run(["make", "-n", *argv[1:]], cwd=REPO, capture_output=True, text=True, timeout=60)
    places = ", ".join(printed.where for printed in MAKE[argv])
    assert result.returncode == 0, f"{places}: {shlex.join(argv)}\n{result.stderr[-2000:]}"


def test_a_block_run_by_another_test_names_a_test_that_reads_the_page():
    for path in pages():
        if path.suffix == ".md":
            for name in MARKER.findall(path.read_text()):
                assert (REPO / name).is_file(), f"{path.name}: {name} does not exist"
                assert path.name in (REPO / name).read_text(), f"{name} does not read {path.name}"


def test_every_study_overlay_prints_the_command_that_runs_it():
    overlays = sorted(REPO.glob("config/studies/*.yaml"))
    assert overlays
    for overlay in overlays:
        name = overlay.relative_to(REPO).as_posix()
        runs = [printed for printed in PRINTED if printed.where.startswith(name + ":")
                and program(printed.argv) == "snakemake" and name in printed.argv]
        assert runs, f"{name} prints no snakemake command that runs it"


def test_the_pages_print_commands_of_every_kind():
    """The extraction finds what the pages are known to print, in every place it reads."""
    places = {printed.where.split(":")[0] for printed in PRINTED}
    assert {"README.md", "docs/studies.md", "config/README.md", "workflow/profiles/fugaku-prepost/preprocess.sbatch",
            "config/studies/models.yaml"} <= places
    assert len(SNAKEMAKE) >= 10 and len(SUPERGCN) >= 10 and MAKE


def test_the_extraction_on_a_hand_written_page(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    page = tmp_path / "page.md"
    page.write_text(
        "Run `snakemake --profile\nworkflow/profiles/local` or `make run`; a message: `supergcn plan: error: x`.\n\n"
        "<!-- printed-commands: run by tests/x.py -->\n"
        "```bash\n"
        "cat > o.yaml <<'EOF'\nseeds: [1]\nEOF\n"
        "snakemake -n --configfiles config/config.yaml \\\n    o.yaml   # plans it\n"
        "OMP_NUM_THREADS=1 mpiexec -n 2 supergcn train --graph g > log 2>&1 && supergcn tables --runs r\n"
        "```\n\n"
        "```text\nsnakemake --profile local\n```\n")
    found = markdown_commands(page)
    files = (("o.yaml", "seeds: [1]\n"),)
    assert found == [
        Printed("page.md:9", ("snakemake", "-n", "--configfiles", "config/config.yaml", "o.yaml"), files, "tests/x.py"),
        Printed("page.md:11", ("mpiexec", "-n", "2", "supergcn", "train", "--graph", "g"), files, "tests/x.py"),
        Printed("page.md:11", ("supergcn", "tables", "--runs", "r"), files, "tests/x.py"),
        Printed("page.md:1", ("snakemake", "--profile", "workflow/profiles/local"), files),
        Printed("page.md:2", ("make", "run"), files),
    ]
    assert command_of(found[1].argv) == (("train",), ("--graph", "g"))
    assert command_of(("supergcn", "pjm", "submit", "--site", "s")) == (("pjm", "submit"), ("--site", "s"))
    assert command_of(("supergcn", "<step>", "--help")) == ((), ("<step>", "--help"))
    with pytest.raises(AssertionError, match="no such command"):
        command_of(("python", "-m", "supergcn.cli", "model", "predict"))
    assert dry_run_argv(found[0].argv, {"o.yaml": tmp_path / "o.yaml"})[-3:] == [str(tmp_path / "o.yaml"),
                                                                                  "--dry-run", "--quiet"]
    with pytest.raises(AssertionError, match="placeholder"):
        dry_run_argv(("snakemake", "--profile", "<yours>"), {})
