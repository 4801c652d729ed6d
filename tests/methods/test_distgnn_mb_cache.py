"""DistGNN-MB's Historical Embedding Cache against a plain model of its rules (a dict of
tag -> (row, stamp, write order), the oldest line found by sorting) under long random
streams; hand-worked cases of its order, expiry and overwrites; the push's degree-biased
choice against its exact probabilities; a push's bytes by hand."""

import itertools

import numpy as np
import pytest
from scipy import stats

from supergcn.methods.distgnn_mb.cache import HistoricalEmbeddingCache, push_bytes, select_push

WIDTH = 3


class ModelCache:
    """The cache's rules written plainly: every call expires the lines with step − stamp >
    life; a store keeps each distinct id's last row, the last ``size`` of them in the order of
    their last occurrences, overwrites the present tags, fills the free lines and then
    replaces the lines of smallest (stamp, write order) that it does not overwrite."""

    def __init__(self, size, life):
        self.size, self.life = size, life
        self.lines = {}
        self.writes = 0
        self.counts = {"hits": 0, "lookups": 0, "evictions": 0, "expiries": 0}

    def expire(self, step):
        if self.life is not None:
            for tag in [tag for tag, (_, stamp, _) in self.lines.items() if step - stamp > self.life]:
                del self.lines[tag]
                self.counts["expiries"] += 1

    def store(self, ids, rows, step):
        self.expire(step)
        last = {tag: position for position, tag in enumerate(ids)}
        entries = sorted(last.items(), key=lambda entry: entry[1])[-self.size:]
        overwritten = {tag for tag, _ in entries if tag in self.lines}
        free = self.size - len(self.lines)
        replaced = max(0, len(entries) - len(overwritten) - free)
        victims = sorted((tag for tag in self.lines if tag not in overwritten), key=lambda tag: self.lines[tag][1:])
        for tag in victims[:replaced]:
            del self.lines[tag]
        self.counts["evictions"] += replaced
        for tag, position in entries:
            self.lines[tag] = (np.float32(rows[position]), step, self.writes)
            self.writes += 1

    def lookup(self, ids, step):
        self.expire(step)
        hit = np.array([tag in self.lines for tag in ids], dtype=bool)
        self.counts["hits"] += int(hit.sum())
        self.counts["lookups"] += len(ids)
        return hit, np.array([self.lines[tag][0] for tag in np.asarray(ids)[hit]]).reshape(-1, WIDTH)


def assert_same(cache, model):
    """The cache's lines (tag, row, stamp, write order) and counters are the model's."""
    state = cache.state()
    occupied = state["tags"] >= 0
    assert len(cache) == occupied.sum() == len(model.lines)
    lines = {int(tag): (row, int(stamp), int(rank)) for tag, row, stamp, rank
             in zip(state["tags"][occupied], state["rows"][occupied], state["stamps"][occupied],
                    state["written"][occupied])}
    assert lines.keys() == model.lines.keys()
    model_ranks = {tag: rank for rank, tag in enumerate(sorted(model.lines, key=lambda tag: model.lines[tag][2]))}
    for tag, (row, stamp, rank) in lines.items():
        np.testing.assert_array_equal(row, model.lines[tag][0])
        assert (stamp, rank) == (model.lines[tag][1], model_ranks[tag])
    assert dict(zip(("hits", "lookups", "evictions", "expiries"), state["counters"].tolist())) == model.counts
    assert {name: getattr(cache, name) for name in model.counts} == model.counts


def random_stream(rng, size, calls):
    """(kind, ids, rows, step) of random stores and lookups: ids from a range of 3 · size so
    that tags repeat, batches up to 2 · size (more than the lines), steps advancing by 0-2."""
    step = 0
    for _ in range(calls):
        step += int(rng.integers(0, 3))
        ids = rng.integers(0, 3 * size, size=int(rng.integers(0, 2 * size + 1)))
        kind = rng.choice(["store", "store", "lookup", "lookup", "lookup", "flush"], p=[.25, .25, .15, .15, .15, .05])
        yield kind, ids, rng.standard_normal((ids.size, WIDTH)).astype(np.float32), step


@pytest.mark.parametrize("size, life", [(1, 0), (3, 0), (4, 1), (8, 2), (16, 3), (5, None), (32, 2)])
def test_the_cache_is_the_model_at_every_call(size, life):
    rng = np.random.default_rng(size * 10 + (life or 9))
    cache, model = HistoricalEmbeddingCache(size, WIDTH, life), ModelCache(size, life)
    for kind, ids, rows, step in random_stream(rng, size, 600):
        if kind == "store":
            cache.store(ids, rows, step)
            model.store(ids.tolist(), rows, step)
        elif kind == "lookup":
            hit, found = cache.lookup(ids, step)
            expected_hit, expected_rows = model.lookup(ids.tolist(), step)
            np.testing.assert_array_equal(hit, expected_hit)
            np.testing.assert_array_equal(found, expected_rows)
        else:
            cache.flush()
            model.lines.clear()
        assert_same(cache, model)
    # The stream reaches every rule: replacements, expiries (where lines expire) and hits.
    assert model.counts["evictions"] > 0 and model.counts["hits"] > 0
    assert (model.counts["expiries"] > 0) == (life is not None)


def test_a_restored_cache_continues_as_the_original(tmp_path):
    rng = np.random.default_rng(5)
    original = HistoricalEmbeddingCache(8, WIDTH, 2)
    stream = list(random_stream(rng, 8, 200))
    for kind, ids, rows, step in stream[:100]:
        original.store(ids, rows, step) if kind == "store" else original.lookup(ids, step)
    np.savez(tmp_path / "cache.npz", **original.state())
    with np.load(tmp_path / "cache.npz") as saved:
        restored = HistoricalEmbeddingCache(8, WIDTH, 2)
        restored.restore(dict(saved))
    for kind, ids, rows, step in stream[100:]:
        if kind == "store":
            original.store(ids, rows, step)
            restored.store(ids, rows, step)
        else:
            first, second = original.lookup(ids, step), restored.lookup(ids, step)
            np.testing.assert_array_equal(first[0], second[0])
            np.testing.assert_array_equal(first[1], second[1])
    for name, array in original.state().items():
        np.testing.assert_array_equal(array, restored.state()[name], err_msg=name)


def test_restore_refuses_another_shape_and_broken_lines():
    state = HistoricalEmbeddingCache(4, WIDTH, 1).state()
    with pytest.raises(ValueError, match="does not fit"):
        HistoricalEmbeddingCache(5, WIDTH, 1).restore(state)
    cache = HistoricalEmbeddingCache(2, WIDTH, None)
    cache.store([1, 2], np.zeros((2, WIDTH)), 0)
    twice = cache.state() | {"tags": np.array([7, 7])}
    with pytest.raises(ValueError, match="a tag is on two lines"):
        cache.restore(twice)
    assert len(cache) == 0
    with pytest.raises(ValueError, match="write order"):
        cache.restore(cache.state() | {"tags": np.array([1, 2]), "written": np.array([0, 0])})


def rows_of(*values):
    return np.repeat(np.array(values, dtype=np.float32)[:, None], WIDTH, axis=1)


def test_oldest_line_first_by_stamp_then_write_order():
    """Lines: 1 (step 0), 2 then 3 (step 1). Storing 4 replaces 1 (oldest stamp); storing
    5 replaces 2 (stamp 1 like 3, written before it); in one call 7 is written before 6,
    so of 3, 4, 5, 7, 6 (after 6 and 7 replace 3 and 4) 5 goes first, then 7."""
    cache = HistoricalEmbeddingCache(3, WIDTH, None)
    cache.store([1], rows_of(1), 0)
    cache.store([2], rows_of(2), 1)
    cache.store([3], rows_of(3), 1)
    cache.store([4], rows_of(4), 1)
    cache.store([5], rows_of(5), 1)
    hit, rows = cache.lookup([1, 2, 3, 4, 5], 1)
    assert hit.tolist() == [False, False, True, True, True] and rows[:, 0].tolist() == [3, 4, 5]
    cache.store([7, 6], rows_of(7, 6), 2)
    cache.store([8], rows_of(8), 2)
    assert cache.lookup([5, 7, 6, 8], 2)[0].tolist() == [False, True, True, True]
    cache.store([9], rows_of(9), 2)
    assert cache.lookup([7, 6, 8, 9], 2)[0].tolist() == [False, True, True, True]
    assert (cache.evictions, cache.expiries) == (6, 0)


def test_a_store_overwrites_its_present_tags_before_it_replaces():
    """Lines A = 1 (oldest) and B = 2; storing [3, 1] overwrites 1 and replaces 2, not 1:
    one eviction, though 3 comes first."""
    cache = HistoricalEmbeddingCache(2, WIDTH, None)
    cache.store([1, 2], rows_of(1, 2), 0)
    cache.store([3, 1], rows_of(3, 10), 1)
    hit, rows = cache.lookup([1, 2, 3], 1)
    assert hit.tolist() == [True, False, True] and rows[:, 0].tolist() == [10, 3]
    assert cache.evictions == 1


def test_a_line_hits_at_exactly_life_steps_and_expires_one_later():
    cache = HistoricalEmbeddingCache(4, WIDTH, 2)
    cache.store([1], rows_of(1), 3)
    cache.store([2], rows_of(2), 4)
    assert cache.lookup([1, 2], 5)[0].tolist() == [True, True]  # 5 − 3 = 2 = life
    assert (cache.expiries, len(cache)) == (0, 2)
    assert cache.lookup([1, 2], 6)[0].tolist() == [False, True]  # 6 − 3 = 3 > life
    assert (cache.expiries, len(cache)) == (1, 1)
    cache.store([3], rows_of(3), 7)  # a store expires too: 7 − 4 > 2
    assert (cache.expiries, len(cache), cache.evictions) == (2, 1, 0)


def test_life_zero_hits_only_the_same_step():
    cache = HistoricalEmbeddingCache(4, WIDTH, 0)
    cache.store([1], rows_of(1), 3)
    assert cache.lookup([1], 3)[0].tolist() == [True]
    assert cache.lookup([1], 4)[0].tolist() == [False]


def test_an_overwrite_keeps_one_line_and_the_last_row_wins():
    cache = HistoricalEmbeddingCache(2, WIDTH, None)
    cache.store([1], rows_of(1), 0)
    cache.store([1], rows_of(2), 1)
    assert len(cache) == 1
    cache.store([1, 5, 1], rows_of(3, 5, 4), 2)
    hit, rows = cache.lookup([1, 5], 2)
    assert hit.all() and rows[:, 0].tolist() == [4, 5]
    assert (len(cache), cache.evictions) == (2, 0)
    # 1's last occurrence comes after 5's: 5 is the older of the two.
    cache.store([9], rows_of(9), 2)
    assert cache.lookup([1, 5, 9], 2)[0].tolist() == [True, False, True]


def test_of_more_ids_than_lines_the_last_ones_are_stored():
    cache = HistoricalEmbeddingCache(2, WIDTH, None)
    cache.store([1, 2, 3], rows_of(1, 2, 3), 0)
    assert cache.lookup([1, 2, 3], 0)[0].tolist() == [False, True, True]
    assert cache.evictions == 0  # 1 was dropped, never stored
    cache.store([4, 5, 6, 7], rows_of(4, 5, 6, 7), 0)
    assert cache.lookup([2, 3, 6, 7], 0)[0].tolist() == [False, False, True, True]
    assert cache.evictions == 2


def test_flush_empties_the_lines_and_keeps_the_counters():
    cache = HistoricalEmbeddingCache(2, WIDTH, 1)
    cache.store([1, 2], rows_of(1, 2), 5)
    cache.lookup([1, 3], 5)
    cache.flush()
    assert len(cache) == 0 and (cache.hits, cache.lookups) == (1, 2)
    hit, rows = cache.lookup([1, 2], 0)  # a flushed cache may take an earlier step
    assert not hit.any() and rows.shape == (0, WIDTH)


def test_the_cache_refuses_what_breaks_its_rules():
    with pytest.raises(ValueError, match="at least one line"):
        HistoricalEmbeddingCache(0, WIDTH, 1)
    with pytest.raises(ValueError, match="life"):
        HistoricalEmbeddingCache(1, WIDTH, -1)
    cache = HistoricalEmbeddingCache(2, WIDTH, 1)
    cache.store([1], rows_of(1), 4)
    with pytest.raises(ValueError, match="steps do not decrease"):
        cache.lookup([1], 3)
    with pytest.raises(ValueError, match="not negative"):
        cache.store([-1], rows_of(1), 4)
    with pytest.raises(ValueError, match="rows of shape"):
        cache.store([1, 2], rows_of(1), 4)
    assert cache.lookup([1], 4)[0].tolist() == [True]  # the refused calls changed nothing


def test_a_push_sends_all_candidates_up_to_the_limit():
    rng = np.random.default_rng(0)
    assert select_push(np.array([5, 9, 2]), np.array([1, 1, 1]), 3, rng).tolist() == [5, 9, 2]
    assert select_push(np.array([5, 9, 2]), np.array([1, 4, 1]), 0, rng).tolist() == []
    candidates, degree = np.arange(100, 140), rng.integers(1, 50, size=40)
    for limit in (1, 7, 39):
        chosen = select_push(candidates, degree, limit, rng)
        assert chosen.size == limit and np.unique(chosen).size == limit
        assert np.isin(chosen, candidates).all() and np.all(np.diff(chosen) > 0)


def test_a_single_pick_follows_the_degrees():
    """limit 1: vertex v with probability deg(v) / Σ deg. 20,000 draws, fixed seed;
    chi-square's p-value above 0.001 (a uniform pick gives p ≈ 0)."""
    degree = np.array([1, 2, 3, 4, 10])
    rng = np.random.default_rng(42)
    picks = [select_push(np.arange(5), degree, 1, rng)[0] for _ in range(20_000)]
    observed = np.bincount(picks, minlength=5)
    expected = 20_000 * degree / degree.sum()
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    uniform = np.full(5, 4_000)
    assert stats.chisquare(observed, uniform).pvalue < 1e-9


def test_a_pair_follows_successive_sampling():
    """limit 2 of 4: pair {i, j} with probability w_i/W · w_j/(W − w_i) + w_j/W · w_i/(W − w_j)
    (the first draw by degree, the second by degree among the rest). 20,000 draws, fixed
    seed; chi-square's p-value above 0.001."""
    degree = np.array([1.0, 2.0, 3.0, 6.0])
    total = degree.sum()
    pairs = list(itertools.combinations(range(4), 2))
    exact = np.array([degree[i] / total * degree[j] / (total - degree[i])
                      + degree[j] / total * degree[i] / (total - degree[j]) for i, j in pairs])
    assert exact.sum() == pytest.approx(1.0)
    rng = np.random.default_rng(7)
    chosen = [tuple(select_push(np.arange(4), degree, 2, rng)) for _ in range(20_000)]
    observed = np.array([chosen.count(pair) for pair in pairs])
    assert stats.chisquare(observed, 20_000 * exact).pvalue > 1e-3


def test_select_push_refuses_misaligned_or_non_positive_degrees():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="as many degrees"):
        select_push(np.arange(3), np.ones(2), 1, rng)
    with pytest.raises(ValueError, match="positive"):
        select_push(np.arange(3), np.array([1, 0, 2]), 1, rng)
    with pytest.raises(ValueError, match="limit"):
        select_push(np.arange(3), np.ones(3), -1, rng)


def test_push_bytes_by_hand():
    # 0 + 3 + 2,000 vertices, each 8 id bytes and 256 floats of 4: 2,003 · 1,032 bytes.
    assert push_bytes([0, 3, 2000], 256) == 2_067_096
    assert push_bytes([], 16) == 0
    with pytest.raises(ValueError, match="negative"):
        push_bytes([1, -1], 4)
