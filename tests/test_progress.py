"""The progress of long steps: plain lines at a steady interval in a log, a live bar on a
terminal, nothing for a short step."""

import io
import re
import time

import pytest

from supergcn import progress as progress_module
from supergcn.progress import progress, running, tracked


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def quick(monkeypatch):
    """Intervals of a tenth of the real ones' order, so that a test runs in a second."""
    monkeypatch.setattr(progress_module, "QUIET_SECONDS", 0.2)
    monkeypatch.setattr(progress_module, "LINE_SECONDS", 0.25)
    monkeypatch.setattr(progress_module, "BAR_SECONDS", 0.05)


def test_a_log_gets_one_whole_line_per_interval_not_per_update(quick):
    log = io.StringIO()
    updates, seconds = 400, 1.3
    with progress("plan: receiving side", total=updates, unit="rank", stream=log) as bar:
        for _ in range(updates):
            time.sleep(seconds / updates)
            bar.update()
    text = log.getvalue()
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    # A line per 0.25 s after the first 0.2 s, and the last one: about 5, never one per update.
    assert 3 <= len(lines) <= 8, lines
    # The step, how far, the rate and the time left, as tqdm writes them.
    shape = re.compile(r"plan: receiving side: +\d+%\|[#0-9 ]*\| \d+/400 \[[0-9:]+<[0-9:]+, +[0-9.?]+ ?rank/s\]")
    assert all(shape.match(line) for line in lines), lines
    assert "100%|" in lines[-1]
    assert [int(re.search(r"(\d+)/400", line).group(1)) for line in lines] == sorted(
        int(re.search(r"(\d+)/400", line).group(1)) for line in lines)


def test_a_step_over_before_the_quiet_seconds_prints_nothing():
    log, terminal = io.StringIO(), _Terminal()
    for stream in (log, terminal):
        with progress("prepare: edge keys", total=10, stream=stream) as bar:
            bar.update(10)
        assert list(tracked(range(3), "a short pass", stream=stream)) == [0, 1, 2]
    assert log.getvalue() == "" and terminal.getvalue() == ""


def test_a_single_long_call_shows_it_is_alive_with_its_elapsed_time(quick):
    log = io.StringIO()
    with running("partition: METIS", stream=log):
        time.sleep(2.2)
    lines = log.getvalue().splitlines()
    # Lines every 0.25 s, each once: the elapsed time is shown to the second.
    assert [re.fullmatch(r"partition: METIS: running for 00:0(\d)", line).group(1) for line in lines] == ["0", "1", "2"]


def test_a_terminal_gets_a_bar_updated_in_place(quick):
    terminal = _Terminal()
    with progress("download graph.bin", total=2_000_000, unit="B", scale=True, stream=terminal) as bar:
        for _ in range(20):
            time.sleep(0.03)
            bar.update(100_000)
    text = terminal.getvalue()
    assert "\r" in text and "\n" not in text.rstrip("\n")
    assert "download graph.bin" in text and "MB" in text and "B/s" in text
    assert "█" in text  # tqdm's unicode bar on a terminal


def test_a_resumed_count_starts_where_it_was(quick):
    log = io.StringIO()
    with progress("download part", total=100, initial=60, stream=log) as bar:
        time.sleep(0.35)
        bar.update(40)
    assert re.search(r"\b60/100\b", log.getvalue().splitlines()[0])
    assert "100/100" in log.getvalue().splitlines()[-1]


def test_an_unnamed_pass_shows_nothing_and_counts_nothing(quick):
    with progress(None, total=5) as bar:
        time.sleep(0.3)
        bar.update(5)
    assert bar.n == 0
