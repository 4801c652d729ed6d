"""How far a long step is: a live bar on a terminal, a plain line at a steady interval in a log.

One mechanism serves every long step (prepare, partition, plan, downloads, hashing), drawn
by tqdm. Where the step's standard error is a terminal, the bar updates in place. Elsewhere
(Snakemake's logs, Slurm's and PJM's output files) tqdm's in-place updates would pile up as
``\\r``-separated fragments, so it is handed a stream that makes each refresh one whole line,
and refreshes at most every :data:`LINE_SECONDS`. A heartbeat refreshes the line at that
interval when no update comes (a partitioner's single long call, a sort), so a log shows a
step that is alive, with its rate and the time left where the total is known. A step over
in less than :data:`QUIET_SECONDS` prints nothing.

    with progress("plan: receiving side", total=num_ranks, unit="rank") as bar:
        for rank in range(num_ranks):
            ...
            bar.update()
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time

from tqdm import tqdm

#: Seconds between two plain lines in a log (and between heartbeats there).
LINE_SECONDS = 30.0
#: Seconds a step runs before it shows anything.
QUIET_SECONDS = 5.0
#: Seconds between heartbeats of a live bar.
BAR_SECONDS = 1.0


class _Lines:
    """A text stream for tqdm that writes each of its refreshes as one line (the same line
    twice in a row once)."""

    def __init__(self, stream) -> None:
        self.stream, self.last = stream, None

    def write(self, text: str) -> int:
        line = text.replace("\r", "").strip()
        if line and line != self.last:
            self.stream.write(line + "\n")
            self.stream.flush()
            self.last = line
        return len(text)

    def flush(self) -> None:
        self.stream.flush()


class _Heartbeat(threading.Thread):
    """Refreshes ``bar`` every ``interval`` seconds once it is due to show, until stopped."""

    def __init__(self, bar: tqdm, interval: float) -> None:
        super().__init__(daemon=True)
        self.bar, self.interval, self.stopped = bar, interval, threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            if time.time() - self.bar.start_t >= QUIET_SECONDS:
                with self.bar.get_lock():
                    self.bar.refresh()

    def stop(self) -> None:
        self.stopped.set()
        self.join()


def _terminal(stream) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class _Unshown:
    """The bar of a pass nobody named: it counts nothing and shows nothing."""

    n = 0

    def update(self, n: float = 1) -> None:
        pass


@contextlib.contextmanager
def progress(what: str | None, total: float | None = None, unit: str = "it", scale: bool = False,
             initial: float = 0, stream=None):
    """A progress bar (a tqdm) for the step ``what`` while the block runs (module docstring).

    Args:
        what: the step, e.g. ``"plan: receiving side"``; None shows nothing (a pass that is
            one of many of a step, or short).
        total: how many ``unit`` the step does, or None where that is not known.
        unit: what it counts (``"B"`` with ``scale`` shows kB, MB, ...).
        scale: show counts with SI prefixes.
        initial: how many were done before (a resumed download), not counted in the rate.
        stream: where it is shown (default: standard error).

    Yields:
        The bar: ``update(n)`` after each piece of work.
    """
    if what is None:
        yield _Unshown()
        return
    stream = sys.stderr if stream is None else stream
    terminal = _terminal(stream)
    # In a log only the heartbeat writes, so lines come at its steady interval.
    bar = tqdm(total=total, initial=initial, desc=what, unit=unit, unit_scale=scale,
               file=stream if terminal else _Lines(stream), mininterval=0.5 if terminal else float("inf"),
               delay=QUIET_SECONDS, dynamic_ncols=terminal, ascii=not terminal,
               ncols=None if terminal else 100, leave=False)
    heartbeat = _Heartbeat(bar, BAR_SECONDS if terminal else LINE_SECONDS)
    heartbeat.start()
    try:
        yield bar
    finally:
        heartbeat.stop()
        if not terminal and time.time() - bar.start_t >= QUIET_SECONDS:
            bar.refresh()  # the last line of a long step: where it ended
        bar.close()


@contextlib.contextmanager
def running(what: str, stream=None):
    """:func:`progress` for a step that reports no counts (one long call): its elapsed time.

    Args:
        what: the step, e.g. ``"partition: METIS"``.
        stream: where it is shown (default: standard error).

    Yields:
        The bar (nothing to update: the heartbeat shows the time).
    """
    with progress(what, unit="", stream=stream) as bar:
        bar.bar_format = "{desc}: running for {elapsed}"
        yield bar


def tracked(iterable, what: str, total: float | None = None, unit: str = "it", stream=None):
    """Each item of ``iterable``, with :func:`progress` counting them.

    Args:
        iterable: the items.
        what: the step (None shows nothing).
        total: how many items; by default ``len(iterable)`` where it has one.
        unit: what an item is, e.g. ``"rank"``.
        stream: where it is shown (default: standard error).

    Yields:
        Each item, once the previous one has been counted.
    """
    total = len(iterable) if total is None and hasattr(iterable, "__len__") else total
    with progress(what, total, unit, stream=stream) as bar:
        for item in iterable:
            yield item
            bar.update()
