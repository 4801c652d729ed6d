"""Running one piece of work on every MPI rank without ever leaving a rank hanging.

An error seen by every rank at the same point (a :class:`CollectiveError`, usually from
:func:`agree`) is reported once, by rank 0, and every rank exits with status 2. Any other
error happened on some ranks only, while the others may be blocked in a collective: the
failing rank reports it with its rank number (with a traceback only if it is a bug) and
aborts the whole job.
"""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable

from supergcn.distributed.comm import unlink_shared_memory
from supergcn.errors import USER_ERROR, SuperGCNError, launched_rank, report

#: Seconds a failing rank waits between printing its message and aborting the job: the
#: launcher forwards a rank's output from a pipe, and an abort that comes first can kill
#: the job with the message still in the pipe (seen under load: an empty stderr).
ABORT_GRACE_SECONDS = 1.0


class CollectiveError(SuperGCNError):
    """An error every rank raises at the same point (so only rank 0 reports it)."""


def agree(comm, setup):
    """Run ``setup()`` on every rank; if it fails on any, fail on all with the messages.

    Setup errors (a wrong world size, a stale plan, a missing file) are usually seen by
    every rank at once; gathering them gives one report instead of P copies, and lets
    every rank exit cleanly instead of some blocking in a collective.
    """
    try:
        result, message = setup(), None
    except SuperGCNError as exc:
        result, message = None, str(exc)
    messages = comm.allgather(message)
    failed = [(rank, text) for rank, text in enumerate(messages) if text is not None]
    if failed:
        distinct = list(dict.fromkeys(text for _, text in failed))
        raise CollectiveError(distinct[0] if len(distinct) == 1 else
                              "; ".join(f"rank {rank}: {text}" for rank, text in failed))
    return result


def run_ranked(work: Callable[[object], None], comm, command: str, debug: bool = False) -> int:
    """Run ``work(comm)`` on every rank; return the exit status (see the module docstring).
    ``debug`` shows the traceback behind a user error too."""
    rank, size = comm.Get_rank(), comm.Get_size()
    try:
        unlink_shared_memory(comm)  # so that an abort, or a kill, leaves none behind
        work(comm)
        return 0
    except CollectiveError as exc:
        # launched_rank(): under srun without an MPI plugin every task is rank 0 of a world of its own.
        if rank == 0 and launched_rank() == 0:
            report(command, str(exc), exc, debug)
        return USER_ERROR
    except BaseException as exc:  # noqa: BLE001 - every failure must abort all ranks
        known = isinstance(exc, SuperGCNError)
        where = f"rank {rank} of {size}"
        if known:
            report(command, f"{where}: {exc}", exc, debug)
        else:
            detail = "".join(traceback.format_exception(exc)).rstrip()
            print(f"supergcn {command}: {where}: error: {detail}", file=sys.stderr, flush=True)
        code = USER_ERROR if known else 1
        if size > 1:
            time.sleep(ABORT_GRACE_SECONDS)
            comm.Abort(code)
        return code


#: The multiplier that folds a seed with the indices of a stream (a prime above any rank count).
_SEED_STRIDE = 1_000_003


def stream_seed(seed: int, *indices: int) -> int:
    """The seed of one random stream of a run: the run's ``seed`` folded with the stream's
    ``indices`` (a rank, then a call count), ``(seed · s + i_1) · s + i_2 ...`` with
    s = 1,000,003, so that distinct ranks and calls draw distinct streams.

    Args:
        seed: the run's seed.
        *indices: the stream's place: a rank, then a count.

    Returns:
        The stream's seed.
    """
    for index in indices:
        seed = seed * _SEED_STRIDE + index
    return seed
