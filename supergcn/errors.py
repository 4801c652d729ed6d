"""The one exception type that the command line reports as a clean, single-line error,
and how such errors are reported.

Every failure a user can cause (bad arguments; missing, truncated or foreign files;
unwritable outputs; inconsistent inputs; numeric overflow) is a :class:`SuperGCNError`,
printed as one line

    supergcn <command>: error: <what went wrong> — <how to fix it>

with exit status 2 and no traceback. Any other exception is a bug and keeps its
traceback. ``--debug`` (or ``SUPERGCN_DEBUG=1``) shows the traceback of a
:class:`SuperGCNError` too.

Under an MPI launcher every rank parses the same arguments and reads the same files, so
an error found before MPI starts is printed by the first rank only
(:func:`launched_rank`).
"""

from __future__ import annotations

import os
import sys
import traceback

#: Set to 1 to see the traceback behind a user error.
DEBUG_ENV = "SUPERGCN_DEBUG"
#: Environment variables in which MPI launchers tell a process its rank: MPICH's Hydra and
#: Intel MPI, Open MPI and Fujitsu MPI, PMIx launchers, Slurm's srun.
RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID")
#: Exit status of a user error (argparse's too).
USER_ERROR = 2
#: The status of a command ended by Ctrl-C, as a shell reports it (128 + SIGINT).
INTERRUPTED = 130


class SuperGCNError(Exception):
    """A problem with the user's input or environment, with the fix in its message.

    ``SuperGCNError(what, fix)`` reads ``<what> — <fix>``; a single argument is used as is.

    Args:
        what: what went wrong (or the whole message, when ``fix`` is None).
        fix: how to fix it; None for none.
    """

    def __init__(self, what: str, fix: str | None = None) -> None:
        super().__init__(what if fix is None else f"{what} — {fix}")


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (libraries' messages can run to pages).

    Args:
        exc: the exception.

    Returns:
        Its message's first non-blank line, or the exception's type name when the message
        is empty.
    """
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def launched_rank() -> int:
    """This process's rank as its MPI launcher announced it (0 when not launched by one);
    readable before MPI is initialised.

    Returns:
        The first of :data:`RANK_VARIABLES` set to a number, else 0.
    """
    for name in RANK_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 0


def wrong_world_size(what: str, ranks: int, started: int) -> SuperGCNError:
    """The error for ``what`` (made for ``ranks`` ranks) run by ``started``, with the launch
    that fits where this process runs.

    Under srun, one process per task alone in its world means srun offered no MPI plugin
    (Slurm's default ``MpiDefault=none``): each task became a singleton MPI job.

    Args:
        what: what was started (a plan, a training run), for the message.
        ranks: the ranks it was made for.
        started: the ranks the launcher started.

    Returns:
        The error to raise (not raised here), its fix the launch command for this
        machine (``mpiexec`` outside Slurm, ``srun --mpi=pmi2`` under it).
    """
    tasks = os.environ.get("SLURM_STEP_NUM_TASKS", os.environ.get("SLURM_NTASKS", ""))
    problem = f"{what} is for {ranks} ranks but {started} {'was' if started == 1 else 'were'} started"
    if "SLURM_JOB_ID" not in os.environ:
        return SuperGCNError(problem, f"launch with `mpiexec -n {ranks}`")
    fix = f"launch with `srun --mpi=pmi2 -n {ranks}` (`srun --mpi=list` shows the MPI plugins of your Slurm)"
    if started == 1 and tasks.isdigit() and int(tasks) > 1:
        return SuperGCNError(f"srun started {tasks} separate single-process MPI jobs instead of one of {tasks} ranks "
                             "(Slurm's MpiDefault is none)", fix)
    return SuperGCNError(problem, fix)


def debugging(requested: bool = False) -> bool:
    """Whether user errors show their traceback: ``--debug`` or ``SUPERGCN_DEBUG=1``.

    Args:
        requested: whether ``--debug`` was given.

    Returns:
        True when requested or when ``SUPERGCN_DEBUG`` is set and not 0.
    """
    return requested or os.environ.get(DEBUG_ENV, "") not in ("", "0")


def report(command: str, message: str, exc: BaseException | None = None, debug: bool = False) -> None:
    """Print ``supergcn <command>: error: <message>`` on stderr (after ``exc``'s
    traceback when debugging).

    Args:
        command: the command's words (``train``, ``bench comm``).
        message: the error's message.
        exc: the exception behind it, whose traceback is printed when debugging.
        debug: whether ``--debug`` was given (:func:`debugging`).
    """
    if exc is not None and debugging(debug):
        traceback.print_exception(exc, file=sys.stderr)
    print(f"supergcn {command}: error: {message}", file=sys.stderr, flush=True)
