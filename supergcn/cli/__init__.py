"""The ``supergcn`` command line: one module per sub-command.

Every module of this package whose name does not start with ``_`` is one command. Its
name is the command's words joined by ``_`` (``prepare``, ``bench_comm`` for
``supergcn bench comm``), and it defines

* ``HELP`` — one line for ``supergcn --help``;
* ``configure(parser)`` — adds its arguments to an :class:`argparse.ArgumentParser`;
* ``run(args)`` — does the work; returns the exit status (None means 0);
* optionally ``wants_retaining_allocator(args)`` — True when a process started for this
  command re-executes itself with a retaining allocator first (mimalloc from the
  project's dependencies; :mod:`supergcn.train.allocator`).

``supergcn <command> ...`` imports that command's module alone (a group's modules for
``supergcn bench --help``, all of them for ``supergcn --help`` or an unknown command),
so a Snakemake rule that runs one command hashes exactly the sources it can execute
(:func:`supergcn.sources.command_hash`). Command
modules import heavy libraries inside ``run``, so that parsing stays fast.

A :class:`~supergcn.errors.SuperGCNError` (a problem with the user's input) and a bad
argument are printed as one line, ``supergcn <command>: error: <message>``, with exit
status 2, once per MPI job; any other exception is a bug and keeps its traceback. Every
command takes ``--debug``, which shows the traceback behind a user error too.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from supergcn import __version__
from supergcn.errors import INTERRUPTED, USER_ERROR, SuperGCNError, launched_rank, report
from supergcn.train.allocator import relaunch_with_retaining_allocator

#: Command groups (first words shared by several commands) and their help.
GROUP_HELP = {
    "bench": "benchmarks of kernels, quantization and MPI exchanges",
    "perf": "the communication performance model and the plan-only scaling study",
}
#: The order ``--help`` lists commands in: the pipeline's.
ORDER = ("prepare", "partition", "plan", "volume", "train", "tables", "figures", "bench", "perf", "pjm")


def command_words(module_name: str) -> tuple[str, ...]:
    """The words of the command a module of this package implements."""
    first, _, rest = module_name.partition("_")
    return (first, rest) if first in GROUP_HELP and rest else (module_name,)


def command_names() -> list[str]:
    """Module names of every command, in :data:`ORDER` of their first word."""
    names = [info.name for info in pkgutil.iter_modules(__path__) if not info.name.startswith("_")]

    def position(name: str) -> tuple[int, tuple[str, ...]]:
        first = command_words(name)[0]
        return (ORDER.index(first) if first in ORDER else len(ORDER), command_words(name))
    return sorted(names, key=position)


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, printed by the first MPI rank only."""

    def error(self, message: str):
        if launched_rank() == 0:
            fix = "" if " — " in message else f" — see `{self.prog} --help`"
            print(f"{self.prog}: error: {message}{fix}", file=sys.stderr, flush=True)
        sys.exit(USER_ERROR)


def build_parser(words: list[str] | tuple[str, ...] = ()) -> argparse.ArgumentParser:
    """The parser of the command that the leading command-line ``words`` name, else of
    every command starting with ``words[0]``, else of all; each leaf parser's ``module``
    default is its command module."""
    parser = Parser(prog="supergcn", description="SuperGCN: distributed full-batch GNN training on CPU clusters, "
                    "and the steps of its scaling pipeline.")
    parser.add_argument("--version", action="version", version=f"supergcn {__version__}")
    top = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    names = command_names()
    words = tuple(words[:2])
    exact = [name for name in names if command_words(name) in (words, words[:1])]
    group = [name for name in names if words and command_words(name)[0] == words[0]]
    names = exact or group or names
    groups: dict[str, argparse._SubParsersAction] = {}
    for name in names:
        module = importlib.import_module(f"{__name__}.{name}")
        first, *rest = command_words(name)
        if rest:
            if first not in groups:
                group = top.add_parser(first, help=GROUP_HELP[first])
                groups[first] = group.add_subparsers(dest="action", required=True, metavar="ACTION")
            leaf = groups[first].add_parser(rest[0], help=module.HELP, description=module.HELP)
        else:
            leaf = top.add_parser(first, help=module.HELP, description=module.HELP)
        module.configure(leaf)
        leaf.add_argument("--debug", action="store_true",
                          help="show the traceback behind an error (also SUPERGCN_DEBUG=1)")
        leaf.set_defaults(module=module, words=(first, *rest))
    return parser


#: Commands that were renamed: old first word -> new.
RENAMED = {"model": "perf"}


def entry() -> int:
    """The ``supergcn`` program (console script and ``python -m supergcn.cli``): :func:`main`
    on the process's own arguments, allowed to re-execute the process."""
    return main(relaunch=True)


def main(argv=None, *, relaunch: bool = False) -> int:
    """Run one ``supergcn`` command; return its exit status.

    ``relaunch`` lets a command that wants a retaining allocator re-execute the whole
    process first; only the process's entry point (:func:`entry`) may ask for it.
    """
    argv = sys.argv[1:] if argv is None else [str(arg) for arg in argv]
    if argv and argv[0] in RENAMED:
        if launched_rank() == 0:
            print(f"supergcn: error: `supergcn {argv[0]}` is now `supergcn {RENAMED[argv[0]]}` — run "
                  f"`supergcn {' '.join([RENAMED[argv[0]], *argv[1:]])}`", file=sys.stderr)
        return USER_ERROR
    args = build_parser(argv[:2]).parse_args(argv)
    try:
        wants = getattr(args.module, "wants_retaining_allocator", None)
        if relaunch and wants is not None and wants(args):
            relaunch_with_retaining_allocator()
        return args.module.run(args) or 0
    except SuperGCNError as exc:
        if launched_rank() == 0:  # every rank of a job meets the same error here
            report(" ".join(args.words), str(exc), exc, args.debug)
        return USER_ERROR
    except KeyboardInterrupt as exc:  # a rank's reaches distributed.ranks, which ends the job
        report(" ".join(args.words), "interrupted (Ctrl-C); its outputs are written whole or not at all: run it "
               "again to redo what it left", exc, args.debug)
        return INTERRUPTED
