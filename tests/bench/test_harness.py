"""The shared timing harness: where the caches are, and timing in turn."""

from supergcn.bench import harness


def fake_cpu_cache(root, entries):
    for number, (level, kind, size) in enumerate(entries):
        folder = root / f"index{number}"
        folder.mkdir()
        (folder / "level").write_text(f"{level}\n")
        (folder / "type").write_text(f"{kind}\n")
        (folder / "size").write_text(f"{size}\n")


def test_cache_sizes_read_as_linux_reports_them(tmp_path):
    fake_cpu_cache(tmp_path, [(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K"),
                              (3, "Unified", "105M")])
    assert harness.cache_sizes(tmp_path) == {"L1": 48 * 2**10, "L2": 2 * 2**20, "L3": 105 * 2**20}
    assert harness.cache_sizes(tmp_path / "missing") == {}


def test_interleaved_times_every_function_each_round():
    calls = []
    medians = harness.interleaved({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, repeats=3)
    assert calls == ["a", "b"] * 4, "a warm-up round, then three timed rounds, in turn"
    assert set(medians) == {"a", "b"} and all(seconds >= 0 for seconds in medians.values())


def test_a_benchmark_says_when_its_ranks_outnumber_the_cores(monkeypatch, capsys):
    monkeypatch.setattr(harness.os, "sched_getaffinity", lambda pid: {0, 1})
    assert not harness.say_if_oversubscribed(2, 1) and capsys.readouterr().err == ""
    assert harness.say_if_oversubscribed(4, 1)
    assert "4 rank(s) x 1 thread(s) on 2 core(s): oversubscribed" in capsys.readouterr().err
    assert harness.say_if_oversubscribed(2, 2), "threads count too: 2 x 2 on 2 cores"
