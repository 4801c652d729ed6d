"""``supergcn train``: distributed full-batch training, one MPI rank per partition.

Its options are the fields of :class:`supergcn.train.config.TrainConfig`, from which the
command line is derived (:func:`supergcn.options.add_arguments`). ``--settings FILE``
reads options from a JSON file (the settings a study hands each job); an option given on
the command line wins over the file.

Run under ``mpiexec -n P`` (P = the plan's ranks), or let it start the ranks itself:
with ``--launcher "mpiexec -n P"`` this process (not an MPI rank) runs the launcher with
the same options, writes the job's output to ``--log``, appends the files a launcher wrote
per rank (``--rank-output``, e.g. Fujitsu MPI's ``-std-proc {log}``, where ``{log}``
becomes the files' prefix) and ends with the job's status; a job killed from outside (a
signal, the memory or time limit) is reported in one line that says a rerun resumes from
the last checkpoint.

An option the run does not read (a mini-batch fan-out without ``--batch-size``, GAT's
heads for GraphSAGE) is refused with what would read it
(:func:`supergcn.train.conflicts.unread_options`). A method that holds more than its share
on every rank (MixGCN's copy of the whole adjacency, its card's ``memory``) is refused,
given ``--memory-per-rank``, where that does not fit, before any rank starts
(:func:`check_method_memory`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

from supergcn.cli._args import output_file
from supergcn.errors import SuperGCNError
from supergcn.options import add_arguments, from_values, values_given
from supergcn.train.config import TRAINING_GROUPS, TrainConfig, with_model_defaults

HELP = "distributed full-batch training (run under mpiexec -n P, or with --launcher)"
#: Exit statuses of supergcn itself: 0, 1 (a bug), 2 (a user error); any other status of a
#: launched job means a rank was killed before it could say why.
OWN_STATUSES = (0, 1, 2)
_ENVIRONMENT_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def wants_retaining_allocator(args) -> bool:
    """Epochs allocate the same large tensors again and again: a rank re-executes itself
    with a retaining allocator (:mod:`supergcn.train.allocator`); the process that only
    launches the ranks does not."""
    return args.launcher is None


def configure(parser) -> None:
    parser.description = ("Run as `mpiexec -n P supergcn train ...` (P = the plan's rank count), or with "
                          "--launcher. Options given on the command line win over --settings.")
    add_arguments(parser, TrainConfig, file_type=output_file, groups=TRAINING_GROUPS)
    job = parser.add_argument_group("a study's job")
    job.add_argument("--settings", type=Path, help="JSON file of options (as `name: value`, names with "
                     "underscores), e.g. the settings a study hands each job")
    job.add_argument("--launcher", help="start the ranks with this command, e.g. 'mpiexec -n 4' (leading "
                     "NAME=value words set the environment), from a process that is not a rank; needs --log")
    job.add_argument("--rank-output", default="",
                     help="with --launcher: launcher options that write each rank's output to files named from "
                          "{log} (Fujitsu MPI: '-std-proc {log}'); the files are appended to --log")
    job.add_argument("--log", type=output_file, help="with --launcher: the file the job's output goes to")


def read_settings(path: Path) -> dict:
    """The options in a settings file (a JSON object)."""
    try:
        values = json.loads(path.read_text())
    except OSError as exc:
        raise SuperGCNError(f"cannot read the settings file {path}: {exc.strerror}", "pass an existing file") from None
    except json.JSONDecodeError as exc:
        raise SuperGCNError(f"the settings file {path} is not JSON ({exc})", "write it as a JSON object") from None
    if not isinstance(values, dict):
        raise SuperGCNError(f"the settings file {path} holds a {type(values).__name__}, not an object of options",
                            "write it as a JSON object of `name: value`")
    return values


def given_values(args) -> dict:
    """The options given: the settings file's, then the command line's over them."""
    settings = read_settings(args.settings) if args.settings is not None else {}
    return {**settings, **values_given(args, TrainConfig)}


def config_of(args) -> TrainConfig:
    """The :class:`TrainConfig` the parsed ``args`` describe: the settings file's options,
    then the command line's."""
    source = f"the settings file {args.settings}" if args.settings is not None else "the command line"
    values = given_values(args)
    return from_values(TrainConfig, with_model_defaults(values, given=values), source)


def run(args) -> int:
    """Train on ``MPI.COMM_WORLD`` (:func:`supergcn.train.trainer.train`); every rank runs
    this. With ``--launcher``, start the ranks instead (:func:`launch`)."""
    from supergcn.train.conflicts import unread_options

    config = config_of(args)
    conflicts = config.conflicts() + unread_options(given_values(args), config)
    if conflicts:
        raise SuperGCNError("; ".join(conflicts))
    check_method_memory(config)
    if args.launcher is not None:
        return 0 if restored(config, args.log) else launch(args)
    from supergcn.distributed.comm import configure_mpi

    configure_mpi()
    from mpi4py import MPI

    from supergcn.distributed.ranks import run_ranked
    from supergcn.train.trainer import train

    return run_ranked(lambda comm: train(config, comm), MPI.COMM_WORLD, "train", args.debug)


def restored(config: TrainConfig, log: Path | None) -> bool:
    """Whether ``--resume`` finds this very run finished and its metrics kept
    (:mod:`supergcn.train.finished`): they are then put at ``--out``, and the line saying so
    printed and written to the log, with no rank started."""
    from supergcn.data.storage import write_text
    from supergcn.train.data import kept_run_identity
    from supergcn.train.finished import keeps_finished, restore_finished

    if not (config.resume and keeps_finished(config)):
        return False
    line = restore_finished(config.checkpoint, Path(config.out), *kept_run_identity(config))
    if line is None:
        return False
    if log is not None:
        write_text(log, line + "\n")
    print(line, flush=True)
    return True


def check_method_memory(config: TrainConfig) -> None:
    """Refuse a run whose method holds more than its share on every rank (its card's
    ``memory``: MixGCN's copy of the whole adjacency) where that, at its peak while built,
    exceeds the ``memory_per_rank`` MiB a rank may use (0: not checked). The launcher checks
    before it starts the ranks, and every rank reads the same manifest, so all agree.

    Args:
        config: the run.

    Raises:
        SuperGCNError: what the method holds does not fit.
    """
    method = config.method
    if method is None or method.memory is None or config.memory_per_rank == 0:
        return
    from supergcn.data.graph import read_graph_meta
    from supergcn.data.storage import human_bytes
    from supergcn.train.conflicts import switched_off

    meta = read_graph_meta(config.graph)
    nodes, entries = meta["num_nodes"], meta["num_edges_directed"]
    peak = method.memory.peak(nodes, entries)
    if peak > config.memory_per_rank * 2**20:
        kept = method.memory.kept(nodes, entries, config.kernel)
        raise SuperGCNError(
            f"{method.title} holds {method.memory.what} of {meta['name']} on every rank: "
            f"{human_bytes(peak)} while it is built ({human_bytes(kept)} kept), more than the "
            f"{config.memory_per_rank} MiB a rank may use (--memory-per-rank; a study's execution.mem_mb_per_rank)",
            "give each rank more memory (a study: raise execution.mem_mb_per_rank, with fewer "
            f"execution.ranks_per_node so that a node holds them), or use {switched_off(method, config)}")


def rank_command(args) -> list[str]:
    """The command every rank runs: this one, with the options given here, without the launcher's."""
    command = [sys.executable, "-m", "supergcn.cli", "train"]
    if args.settings is not None:
        command += ["--settings", str(args.settings)]
    for name, value in values_given(args, TrainConfig).items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            command.append(flag if value else f"--no-{flag[2:]}")
        elif value is not None:
            command += [flag, str(value)]
    return command + (["--debug"] if args.debug else [])


def launch(args) -> int:
    """Run the ranks with ``args.launcher`` (module docstring); the job's exit status."""
    if args.log is None:
        raise SuperGCNError("--launcher needs --log: the file the job's output goes to", "pass --log FILE")
    words = shlex.split(args.launcher)
    environment = dict(os.environ)
    while words and _ENVIRONMENT_ASSIGNMENT.match(words[0]):
        name, _, value = words.pop(0).partition("=")
        environment[name] = value
    rank_files = f"{args.log}.rank"
    command = words + shlex.split(args.rank_output.replace("{log}", rank_files)) + rank_command(args)
    with open(args.log, "w") as log:
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=environment)

        def forward(received, frame):  # a job cancelled from outside stops its ranks too
            child.send_signal(received)
        previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            status = child.wait()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    with open(args.log, "a") as log:
        for rank_file in sorted(Path(rank_files).parent.glob(Path(rank_files).name + ".*")):
            log.write(f"== {rank_file}\n{rank_file.read_text(errors='replace')}")
            rank_file.unlink()
    status = 128 - status if status < 0 else status  # killed by a signal: as a shell reports it
    if status not in OWN_STATUSES:
        message = (f"supergcn train: error: the MPI job ended with status {status}: a rank was killed (by a signal, "
                   "for memory or at the time limit) — run the same target again: training resumes from its last "
                   "checkpoint")
        with open(args.log, "a") as log:
            print(message, file=log)
        print(message, file=sys.stderr)
    return status
