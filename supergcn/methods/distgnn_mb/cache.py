"""DistGNN-MB's Historical Embedding Cache and the choice of what a rank pushes into its
peers' caches (Vasimuddin et al., "DistGNN-MB", §3.2, Alg. 1-2).

Each rank keeps, per GNN layer, a cache of ``size`` lines (the paper's cs); a line holds a
float32 row of the layer's input width, its tag (the vertex's original id) and its stamp
(the step it was written). With s the step of a call and ``life`` the paper's ls:

* expiry: at every call, first, each line with s − stamp > life is purged (freed); so a
  lookup at s hits only rows written at steps s − life … s (``life=None``: never, as the
  published code keeps its input-feature lines);
* store: the call's entries are its distinct ids, each with the row of its LAST
  occurrence, in the order of those last occurrences; when there are more than ``size``,
  the last ``size`` are kept and the others dropped (not stored, not counted). An entry
  whose tag is present overwrites its line (row and stamp); the others fill free lines,
  then replace the oldest lines that this call does not overwrite, each replacement one
  eviction. Lines are then written in the entries' order;
* oldest cache line first (OCF): lines are ordered by (stamp, write order), write order
  being the order of all writes, call after call and in a call as above. Steps never
  decrease between flushes, so this is the order of the writes alone;
* lookup: a hit returns the line's row; a lookup refreshes nothing.

The lines live in numpy arrays: a doubly linked list of the lines in write order (oldest
first) makes expiry a walk from its head and a replacement a pop of its head; an
open-addressing table (linear probing, deletion by backward shift, at most half full)
maps tags to lines. A call of n ids costs O(n) in Numba kernels, plus O(n log n) for the
sort that finds a store's repeated ids, plus O(1) per line it expires.

Where the published code (libxsmm/tpp-pytorch-extension, a DGL patch) differs: it empties
every cache at each epoch's start (:meth:`HistoricalEmbeddingCache.flush`), its input-feature
lines never expire (``life=None``) and its eviction indexes the batch position where it
means the evicted tag (here: the evicted line's tag leaves the table).

The push (Alg. 2, lines 15-24): at each layer of a mini-batch, a rank sends each peer the
ids and rows of up to nc of the batch's solid vertices that are halos on that peer,
sampled by degree (:func:`select_push`); one push costs :func:`push_bytes`.
"""

from __future__ import annotations

import numpy as np

from supergcn.kernels.jit import njit

#: A free line's tag and an empty table slot.
_FREE = -1
#: Fibonacci hashing's multiplier, 2^64 / golden ratio: spreads consecutive ids over the table.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
#: Positions in a cache's ``_ends`` array.
_OLDEST, _NEWEST, _FREE_COUNT = 0, 1, 2
#: Positions in a line's row of ``_links``.
_OLDER, _NEWER = 0, 1
#: The order of the counters in a checkpoint.
_COUNTERS = ("hits", "lookups", "evictions", "expiries")


@njit(cache=True)
def _home(tag, shift):
    """The slot a tag's probe starts at: the top bits of tag · 2^64/φ (mod 2^64)."""
    return np.int64((np.uint64(tag) * _GOLDEN) >> np.uint64(shift))


@njit(cache=True)
def _find(slot_tags, tag, shift):
    """The slot holding ``tag``, or the empty slot that ends its probe."""
    mask = slot_tags.size - 1
    slot = _home(tag, shift)
    while slot_tags[slot] != tag and slot_tags[slot] != _FREE:
        slot = (slot + 1) & mask
    return slot


@njit(cache=True)
def _delete(slot_tags, slot_lines, slot, shift):
    """Empty a slot, moving back each later entry of its run whose probe starts at or
    before the hole, so that every probe still finds its tag."""
    mask = slot_tags.size - 1
    hole = slot
    probe = slot
    while True:
        probe = (probe + 1) & mask
        tag = slot_tags[probe]
        if tag == _FREE:
            break
        # The entry may fill the hole when its home is not cyclically in (hole, probe].
        if ((probe - _home(tag, shift)) & mask) >= ((probe - hole) & mask):
            slot_tags[hole] = tag
            slot_lines[hole] = slot_lines[probe]
            hole = probe
    slot_tags[hole] = _FREE


@njit(cache=True)
def _unlink(line, links, ends):
    """Take a line out of the write-order list."""
    older, newer = links[line, _OLDER], links[line, _NEWER]
    if older == _FREE:
        ends[_OLDEST] = newer
    else:
        links[older, _NEWER] = newer
    if newer == _FREE:
        ends[_NEWEST] = older
    else:
        links[newer, _OLDER] = older


@njit(cache=True)
def _append(line, links, ends):
    """Put a line at the newest end of the write-order list."""
    newest = ends[_NEWEST]
    links[line, _OLDER] = newest
    links[line, _NEWER] = _FREE
    if newest == _FREE:
        ends[_OLDEST] = line
    else:
        links[newest, _NEWER] = line
    ends[_NEWEST] = line


@njit(cache=True)
def _release(line, line_tags, links, ends, slot_tags, slot_lines, shift):
    """Empty an occupied line: out of the write order, its tag out of the table."""
    _unlink(line, links, ends)
    _delete(slot_tags, slot_lines, _find(slot_tags, line_tags[line], shift), shift)
    line_tags[line] = _FREE


@njit(cache=True)
def _expire(step, life, line_tags, stamps, links, ends, free_lines, slot_tags, slot_lines, shift):
    """Free the lines with step − stamp > life, oldest first; returns how many."""
    expired = 0
    while ends[_OLDEST] != _FREE and step - stamps[ends[_OLDEST]] > life:
        line = ends[_OLDEST]
        _release(line, line_tags, links, ends, slot_tags, slot_lines, shift)
        free_lines[ends[_FREE_COUNT]] = line
        ends[_FREE_COUNT] += 1
        expired += 1
    return expired


@njit(cache=True)
def _store(tags, step, line_tags, stamps, links, ends, free_lines, slot_tags, slot_lines, shift):
    """Place distinct tags (at most one per line) at step: the present ones keep their lines,
    the others take free lines, then the oldest lines not kept; all are then appended in the
    tags' order. Returns each tag's line and the evictions."""
    lines = np.full(tags.size, _FREE, dtype=np.int64)
    for position in range(tags.size):
        slot = _find(slot_tags, tags[position], shift)
        if slot_tags[slot] == tags[position]:
            lines[position] = slot_lines[slot]
            # Out of the list, a kept line cannot be the oldest that a new tag replaces.
            _unlink(lines[position], links, ends)
    evictions = 0
    for position in range(tags.size):
        if lines[position] != _FREE:
            continue
        if ends[_FREE_COUNT] > 0:
            ends[_FREE_COUNT] -= 1
            line = free_lines[ends[_FREE_COUNT]]
        else:
            line = ends[_OLDEST]
            _release(line, line_tags, links, ends, slot_tags, slot_lines, shift)
            evictions += 1
        slot = _find(slot_tags, tags[position], shift)
        slot_tags[slot] = tags[position]
        slot_lines[slot] = line
        line_tags[line] = tags[position]
        lines[position] = line
    for position in range(tags.size):
        stamps[lines[position]] = step
        _append(lines[position], links, ends)
    return lines, evictions


@njit(cache=True)
def _lookup(tags, slot_tags, slot_lines, shift):
    """Each tag's line, −1 where absent."""
    lines = np.full(tags.size, _FREE, dtype=np.int64)
    for position in range(tags.size):
        slot = _find(slot_tags, tags[position], shift)
        if slot_tags[slot] == tags[position]:
            lines[position] = slot_lines[slot]
    return lines


@njit(cache=True)
def _write_ranks(links, ends, size):
    """Each line's place in the write order (0 the oldest), −1 for a free line."""
    ranks = np.full(size, _FREE, dtype=np.int64)
    line, rank = ends[_OLDEST], 0
    while line != _FREE:
        ranks[line] = rank
        line, rank = links[line, _NEWER], rank + 1
    return ranks


@njit(cache=True)
def _rebuild(line_tags, lines_in_order, links, ends, slot_tags, slot_lines, shift):
    """Append the occupied lines in write order and table their tags, into an empty cache;
    False where two lines share a tag."""
    for line in lines_in_order:
        slot = _find(slot_tags, line_tags[line], shift)
        if slot_tags[slot] == line_tags[line]:
            return False
        slot_tags[slot] = line_tags[line]
        slot_lines[slot] = line
        _append(line, links, ends)
    return True


def _as_ids(ids) -> np.ndarray:
    """Original vertex ids as a 1-D int64 array; they must not be negative (−1 marks a free line)."""
    ids = np.ascontiguousarray(ids, dtype=np.int64).reshape(-1)
    if ids.size and ids.min() < 0:
        raise ValueError(f"vertex ids are not negative, got {ids.min()}")
    return ids


class HistoricalEmbeddingCache:
    """One rank's cache of one layer's remote rows (the module docstring states the rules).

    Counters, cumulative over flushes: ``hits`` and ``lookups`` (ids looked up, a repeated
    id counted each time), ``evictions`` (live lines replaced by a store) and ``expiries``
    (lines purged for their age); a layer's hit rate is hits / lookups.

    Args:
        size: lines (the paper's cs), at least 1.
        width: floats per row (the layer's input width), at least 1.
        life: the most steps a line lives (ls): a line written at step t hits up to step
            t + life; None never expires.

    Raises:
        ValueError: size or width below 1, or a negative life.
    """

    def __init__(self, size: int, width: int, life: int | None) -> None:
        if size < 1 or width < 1:
            raise ValueError(f"a cache has at least one line of at least one float, got {size} x {width}")
        if life is not None and life < 0:
            raise ValueError(f"a line's life is not negative, got {life}")
        self.size, self.width, self.life = int(size), int(width), life
        # A power of two at least twice the lines: the table is never more than half full.
        bits = (2 * self.size - 1).bit_length()
        self._shift = 64 - bits
        self._slot_tags = np.full(1 << bits, _FREE, dtype=np.int64)
        self._slot_lines = np.zeros(1 << bits, dtype=np.int64)
        self._rows = np.zeros((self.size, self.width), dtype=np.float32)
        self._tags = np.full(self.size, _FREE, dtype=np.int64)
        self._stamps = np.zeros(self.size, dtype=np.int64)
        self._links = np.full((self.size, 2), _FREE, dtype=np.int64)
        self._ends = np.zeros(3, dtype=np.int64)
        self._free = np.zeros(self.size, dtype=np.int64)
        self.hits = self.lookups = self.evictions = self.expiries = 0
        self.flush()

    def __len__(self) -> int:
        """The occupied lines."""
        return self.size - int(self._ends[_FREE_COUNT])

    def flush(self) -> None:
        """Empty every line (the published code does so at each epoch's start); the counters
        stay, and the next call may take any step."""
        self._slot_tags.fill(_FREE)
        self._tags.fill(_FREE)
        self._links.fill(_FREE)
        self._ends[:] = (_FREE, _FREE, self.size)
        # Free lines are taken from the stack's top: line 0 first.
        self._free[:] = np.arange(self.size - 1, -1, -1)
        self._last_step: int | None = None

    def _advance(self, step: int) -> None:
        """Move the cache's clock to ``step`` and purge the lines it expires."""
        if self._last_step is not None and step < self._last_step:
            raise ValueError(f"steps do not decrease between flushes: {step} after {self._last_step}")
        self._last_step = int(step)
        if self.life is not None:
            self.expiries += _expire(self._last_step, self.life, self._tags, self._stamps, self._links, self._ends,
                                     self._free, self._slot_tags, self._slot_lines, self._shift)

    def store(self, ids, rows, step: int) -> None:
        """Write pushed rows at ``step``: expiry first, then each distinct id's last row,
        overwriting its tag's line, else a free line, else the oldest line this call does
        not overwrite (an eviction); of more than ``size`` distinct ids, the last ``size``.

        Args:
            ids: original vertex ids, not negative.
            rows: one float32 row of ``width`` per id.
            step: the current step, not below the last call's since the last flush.

        Raises:
            ValueError: a negative id, rows of another shape, or a step that goes back.
        """
        ids = _as_ids(ids)
        rows = np.asarray(rows, dtype=np.float32)
        if rows.shape != (ids.size, self.width):
            raise ValueError(f"{ids.size} ids need rows of shape {(ids.size, self.width)}, got {rows.shape}")
        self._advance(step)
        _, first_from_end = np.unique(ids[::-1], return_index=True)
        positions = np.sort(ids.size - 1 - first_from_end)[-self.size:]
        lines, evictions = _store(ids[positions], self._last_step, self._tags, self._stamps, self._links, self._ends,
                                  self._free, self._slot_tags, self._slot_lines, self._shift)
        # All ids distinct and no more than the lines: the rows are in place, 100 MB uncopied at 100 k x 256.
        self._rows[lines] = rows if positions.size == ids.size else rows[positions]
        self.evictions += evictions

    def lookup(self, ids, step: int) -> tuple[np.ndarray, np.ndarray]:
        """Search the cache at ``step`` (expiry first); nothing is refreshed.

        Args:
            ids: original vertex ids, not negative (the batch's halo vertices).
            step: the current step, not below the last call's since the last flush.

        Returns:
            The hit mask (one bool per id) and the hits' rows, one per True of the mask
            in the ids' order (a copy, float32, ``width`` wide).

        Raises:
            ValueError: a negative id or a step that goes back.
        """
        ids = _as_ids(ids)
        self._advance(step)
        lines = _lookup(ids, self._slot_tags, self._slot_lines, self._shift)
        hit = lines >= 0
        self.hits += int(hit.sum())
        self.lookups += ids.size
        return hit, self._rows[lines[hit]]

    def state(self) -> dict[str, np.ndarray]:
        """The cache as plain arrays (for a checkpoint): per line its ``tags`` (−1 free),
        ``rows``, ``stamps`` and ``written`` (its place in the write order, 0 the oldest,
        −1 free); the ``counters`` (hits, lookups, evictions, expiries) and ``step`` (the
        last call's, empty when none since the last flush).

        Returns:
            Copies of the arrays, by name.
        """
        return {"tags": self._tags.copy(), "rows": self._rows.copy(), "stamps": self._stamps.copy(),
                "written": _write_ranks(self._links, self._ends, self.size),
                "counters": np.array([getattr(self, name) for name in _COUNTERS], dtype=np.int64),
                "step": np.array([] if self._last_step is None else [self._last_step], dtype=np.int64)}

    def restore(self, state: dict[str, np.ndarray]) -> None:
        """Continue from :meth:`state`'s arrays, exactly where that cache stood.

        Args:
            state: the arrays of a cache of the same size and width.

        Raises:
            ValueError: arrays of another shape, or lines that are not a cache's (a tag
                twice, write places that are not 0 … n−1, stamps that go back in write order).
        """
        tags, written = np.asarray(state["tags"], dtype=np.int64), np.asarray(state["written"], dtype=np.int64)
        stamps = np.asarray(state["stamps"], dtype=np.int64)
        rows = np.asarray(state["rows"], dtype=np.float32)
        if rows.shape != (self.size, self.width) or any(line_array.shape != (self.size,)
                                                        for line_array in (tags, written, stamps)):
            raise ValueError(f"a checkpoint of a {rows.shape} cache does not fit one of {(self.size, self.width)}")
        occupied = np.flatnonzero(tags >= 0)
        lines_in_order = occupied[np.argsort(written[occupied])]
        if not (np.array_equal(np.sort(written[occupied]), np.arange(occupied.size))
                and np.array_equal(written < 0, tags < 0) and np.all(np.diff(stamps[lines_in_order]) >= 0)):
            raise ValueError("a checkpoint's lines are not a cache's: their write order is broken")
        self.flush()
        if not _rebuild(tags, lines_in_order, self._links, self._ends, self._slot_tags, self._slot_lines,
                        self._shift):
            self.flush()
            raise ValueError("a checkpoint's lines are not a cache's: a tag is on two lines")
        self._tags[:], self._stamps[:], self._rows[:] = tags, stamps, rows
        free = np.flatnonzero(tags < 0)[::-1]
        self._free[:free.size] = free
        self._ends[_FREE_COUNT] = free.size
        self.hits, self.lookups, self.evictions, self.expiries = (int(count) for count in state["counters"])
        step = np.asarray(state["step"], dtype=np.int64)
        self._last_step = int(step[0]) if step.size else None


def select_push(candidates, degree, limit: int, rng: np.random.Generator) -> np.ndarray:
    """The vertices one push sends one peer (Alg. 2, lines 18-20): of ``candidates`` (this
    rank's solid vertices of the step's mini-batch that are halos on the peer), all when there
    are at most ``limit`` (the paper's nc), else ``limit`` of them drawn without replacement,
    each draw picking a not yet drawn vertex v with probability deg(v) / Σ deg over those
    not yet drawn (successive sampling, numpy's ``Generator.choice(p=…, replace=False)``).
    For ``limit`` = 1 a vertex is chosen with probability deg(v) / Σ deg; for more, its
    chance still grows with its degree but not in proportion.

    The published code differs: it keeps each candidate independently with probability
    deg(v) / 2^⌊log2 max deg⌋ (capped at 1) and truncates the kept ones to nc, so it may
    send fewer than nc where more are available.

    Args:
        candidates: the candidate vertices (any ids), 1-D.
        degree: each candidate's degree, positive, aligned with ``candidates``.
        limit: the most vertices sent (nc), not negative.
        rng: the random stream of the draw.

    Returns:
        The chosen candidates, in their order in ``candidates``.

    Raises:
        ValueError: degrees not aligned with the candidates or not positive, or a negative limit.
    """
    candidates = np.asarray(candidates).reshape(-1)
    degree = np.asarray(degree, dtype=np.float64).reshape(-1)
    if degree.shape != candidates.shape:
        raise ValueError(f"{candidates.size} candidates need as many degrees, got {degree.size}")
    if limit < 0:
        raise ValueError(f"a push's limit is not negative, got {limit}")
    if not np.all(degree > 0) or not np.all(np.isfinite(degree)):
        raise ValueError("a candidate's degree is positive and finite")
    if candidates.size <= limit:
        return candidates.copy()
    drawn = rng.choice(candidates.size, size=limit, replace=False, p=degree / degree.sum())
    return candidates[np.sort(drawn)]


def push_bytes(counts, width: int) -> int:
    """Bytes of one push at one layer: Σ over peers of n_p · (8 + 4 · width), n_p the
    vertices sent peer p (min(nc, its candidates), :func:`select_push`'s length), each an
    int64 original id and a float32 row.

    Args:
        counts: the vertices sent to each peer.
        width: the layer's input width (floats per row).

    Returns:
        The bytes sent.

    Raises:
        ValueError: a negative count.
    """
    counts = np.asarray(counts, dtype=np.int64)
    if counts.size and counts.min() < 0:
        raise ValueError(f"a push sends no negative count of vertices, got {counts.min()}")
    return int(counts.sum()) * (8 + 4 * int(width))
