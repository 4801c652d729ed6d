"""Per-rank wall-clock accounting of one training epoch, split into the paper's phases.

Fig. 12 of the paper splits an epoch into aggregation, communication, quantization,
synchronization (waiting for slower ranks) and other (dense layers, optimizer, ...).
A :class:`PhaseTimer` belongs to one rank and one run; ``other`` is what the epoch's
total leaves after the named phases.
"""

from __future__ import annotations

import contextlib
import time

PHASES = ("aggregation", "communication", "quantization", "synchronization")
#: The named phases and ``other``, which add up to an epoch.
BREAKDOWN = (*PHASES, "other")


class PhaseTimer:
    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)

    def reset(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)

    @contextlib.contextmanager
    def phase(self, name: str):
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - started

    def breakdown(self, total: float) -> dict[str, float]:
        """The named phases plus ``other`` and ``total`` for an epoch of ``total`` seconds."""
        named = dict(self.seconds)
        named["other"] = max(0.0, total - sum(named.values()))
        named["total"] = total
        return named
