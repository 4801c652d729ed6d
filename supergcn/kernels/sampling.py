"""Uniform neighbour sampling of mini-batch blocks on one rank's partition (DistGNN-MB §3.3).

The graph is a rank's :class:`~supergcn.methods.distgnn_mb.graph.PartitionGraph`: local ids
``0 .. n-1`` are its solid (owned) nodes, each with its whole row of neighbours, and
``n .. n+h-1`` its halo nodes, which have no row here: a halo is a leaf, never expanded.

Blocks. Fan-outs come in DGL's order: ``fanouts[l]`` is layer l's, ``fanouts[0]`` the input
layer's (``--fanouts 5,10,15`` samples 15 neighbours of each seed, then 10, then 5). With
seeds S (solid, distinct) and L = ``len(fanouts)`` layers, destinations D_{L-1} = S and, for
l = L-1 down to 0, every v in D_l draws::

    N_l(v) ⊆ N(v),   |N_l(v)| = k_l(v) = min(f_l, deg v)   (all of N(v) where f_l = -1),

uniformly among the C(deg v, k_l(v)) subsets of that size (without replacement; all of
N(v) where deg v <= f_l). Block l is the bipartite graph D_l <- U_l with sources::

    U_l = D_l ++ sorted(∪_{v in D_l} N_l(v) - D_l),

destinations first, in order (DGL's convention), then the new sources by increasing local
id, so solid before halo (halo ids are >= n). Its ``num_solid`` first sources are solid, and
the next layer's destinations are exactly those: D_{l-1} = U_l[:num_solid]; the halo
sources, U_l[num_solid:], are leaves. Block l's CSR lists, per destination, the positions
in U_l of its drawn neighbours, in the order of its row. Blocks are returned input layer
first: ``blocks[-1]``'s destinations are the seeds, ``blocks[0]``'s sources the nodes
whose input rows the batch reads.

Randomness, counter-based so that a draw depends on nothing but (key, layer, destination):
with SplitMix64's step σ(x) = fin(x + γ) (γ = 0x9E3779B97F4A7C15, fin its finaliser: three
rounds of xor-shift and multiply, a bijection of 64-bit words)::

    K = σ(σ(σ(σ(seed) ^ rank) ^ epoch) ^ step),   K_l = σ(K ^ l),   s_v = σ(K_l ^ v),

and destination v's i-th random word (i = 0, 1, ...) is x_i = fin(s_v + (i + 1) γ),
SplitMix64's stream seeded with s_v. No stream is shared between destinations, so the
blocks are the same at any thread count. An integer uniform on 0..b-1 is
(x >> 1) mod b, within b / 2^63 of uniform.

Subsets by Floyd's algorithm (Bentley & Floyd, "A sample of brilliance", CACM 1987): for
j = d-k, ..., d-1 draw t uniform on 0..j and add t, or j where t is already in; each
k-subset of 0..d-1 comes out with probability 1 / C(d, k), in O(k^2) time and no scratch
of the degree's size. The offsets are then sorted, so a destination's neighbours keep
the order of its row.

Offsets and pointers are int64 throughout (rows past 2^31 entries, degrees past 2^32).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from supergcn.kernels.jit import njit, prange

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_WORD = 1 << 64
#: The parts of a sampling key, in the order they are folded into K.
KEY_PARTS = ("seed", "rank", "epoch", "step")


@dataclass(frozen=True)
class Block:
    """One layer of a sampled mini-batch (module docstring): destinations <- sources.

    Args:
        num_dst: destinations; they are ``src[:num_dst]``, in order.
        num_solid: sources that are solid (``src[:num_solid]``, the next layer's
            destinations); ``src[num_solid:]`` are halos.
        src: the sources' local ids (int64): the destinations, then the new sources by
            increasing id.
        indptr: CSR pointers over the destinations (int64, ``num_dst + 1``).
        indices: each drawn neighbour's position in ``src`` (int64), in the order of its
            destination's row.
    """

    num_dst: int
    num_solid: int
    src: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray

    @property
    def dst(self) -> np.ndarray:
        """The destinations' local ids, ``src[:num_dst]``."""
        return self.src[:self.num_dst]


def row_pointers(counts) -> np.ndarray:
    """CSR pointers of rows of ``counts`` entries: 0 then the inclusive prefix sums, summed
    in int64 whatever the counts' type (no int32 overflow past 2^31 entries).

    Args:
        counts: entries per row (any integer type).

    Returns:
        int64 pointers, one more than the rows.
    """
    pointers = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, dtype=np.int64, out=pointers[1:])
    return pointers


@njit(nogil=True, cache=True, inline="always")
def _finalise(z):
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@njit(nogil=True, cache=True)
def splitmix64(x):
    """SplitMix64's step σ(x) = fin(x + γ) of one 64-bit word (module docstring).

    Args:
        x: the word (np.uint64).

    Returns:
        The mixed word (np.uint64).
    """
    return _finalise(x + _GOLDEN)


@njit(nogil=True, cache=True, inline="always")
def _uniform_below(word, bound):
    return np.int64(word >> np.uint64(1)) % bound


@njit(nogil=True, cache=True)
def choose_offsets(degree, count, stream, out):
    """Floyd's uniform ``count``-subset of 0 .. ``degree``-1, drawn from the SplitMix64
    stream seeded with ``stream`` (word i: fin(stream + (i+1) γ)), written sorted into
    ``out[:count]``; every subset has probability 1 / C(degree, count).

    Args:
        degree: d, the row's length (int64, may exceed 2^32).
        count: k <= d, how many to draw.
        stream: the destination's stream word s_v (np.uint64).
        out: int64 array of at least k entries.
    """
    state = stream
    for filled in range(count):
        state += _GOLDEN
        j = degree - count + filled
        offset = _uniform_below(_finalise(state), j + 1)
        for earlier in range(filled):
            if out[earlier] == offset:
                offset = j
                break
        out[filled] = offset
    for i in range(1, count):  # insertion sort: k is a fan-out, a few dozen at most
        value = out[i]
        k = i - 1
        while k >= 0 and out[k] > value:
            out[k + 1] = out[k]
            k -= 1
        out[k + 1] = value


@njit(parallel=True, nogil=True, cache=True)
def _draw_neighbours(indptr, indices, dst, layer_key, out_indptr, out):
    """Each destination's drawn neighbours (local ids), into its slice of ``out``."""
    for i in prange(len(dst)):
        v = dst[i]
        start = indptr[v]
        degree = indptr[v + 1] - start
        first = out_indptr[i]
        count = out_indptr[i + 1] - first
        if count == degree:
            for k in range(degree):
                out[first + k] = indices[start + k]
        else:
            drawn = out[first:first + count]
            choose_offsets(degree, count, splitmix64(layer_key ^ np.uint64(v)), drawn)
            for k in range(count):
                drawn[k] = indices[start + drawn[k]]


def stream_key(key) -> np.uint64:
    """K, the fold of ``key`` = (seed, rank, epoch, step) by SplitMix64 (module docstring);
    each part is taken modulo 2^64 (a negative seed is allowed).

    Args:
        key: four integers, :data:`KEY_PARTS`.

    Returns:
        K as np.uint64.

    Raises:
        ValueError: ``key`` is not four integers.
    """
    parts = tuple(key)
    if len(parts) != len(KEY_PARTS) or not all(isinstance(part, (int, np.integer)) for part in parts):
        raise ValueError(f"a sampling key is four integers {KEY_PARTS}, not {key!r}")
    folded = np.uint64(0)
    for part in parts:
        folded = np.uint64(splitmix64(folded ^ np.uint64(int(part) % _WORD)))
    return folded


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """The distinct values of ``values``, increasing: ``np.unique``'s result by one sort.
    NumPy 2.4's ``np.unique`` of integers goes through a hash table first, measured 9 times
    slower on 60,000 int64 ids (56 ms against 6).

    Args:
        values: a vector.

    Returns:
        A new sorted vector without repeats.
    """
    ordered = np.sort(values)
    kept = np.ones(len(ordered), dtype=bool)
    np.not_equal(ordered[1:], ordered[:-1], out=kept[1:])
    return ordered[kept]


def _sample_layer(graph, dst: np.ndarray, fanout: int, layer_key: np.uint64) -> Block:
    """Block l of the module docstring for destinations ``dst`` and fan-out ``fanout``."""
    degrees = graph.indptr[dst + 1] - graph.indptr[dst]
    indptr = row_pointers(degrees if fanout < 0 else np.minimum(degrees, fanout))
    neighbours = np.empty(int(indptr[-1]), dtype=np.int64)
    _draw_neighbours(graph.indptr, graph.indices, dst, layer_key, indptr, neighbours)
    new = np.setdiff1d(sorted_unique(neighbours), dst, assume_unique=True)
    src = np.concatenate([dst, new])
    by_id = np.argsort(src, kind="stable")
    positions = by_id[np.searchsorted(src[by_id], neighbours)]
    num_solid = len(dst) + int(np.searchsorted(new, graph.num_owned))
    return Block(num_dst=len(dst), num_solid=num_solid, src=src, indptr=indptr, indices=positions)


def sample_blocks(graph, seeds, fanouts, key) -> list[Block]:
    """The blocks of one mini-batch (module docstring), input layer first.

    Args:
        graph: the rank's :class:`~supergcn.methods.distgnn_mb.graph.PartitionGraph` (its
            ``indptr``, ``indices`` and ``num_owned`` are read).
        seeds: the batch's seed nodes: distinct solid local ids, in the order the last
            block's destinations take.
        fanouts: neighbours drawn per destination and layer, DGL's order (``fanouts[0]``
            the input layer's); -1 takes every neighbour.
        key: (seed, rank, epoch, step), which alone fixes the draw (:func:`stream_key`).

    Returns:
        ``len(fanouts)`` blocks; ``blocks[-1].dst`` are the seeds and
        ``blocks[l - 1].dst`` is ``blocks[l].src[:blocks[l].num_solid]``.

    Raises:
        ValueError: no fan-out, one below -1, seeds that are not distinct solid nodes, or
            a key that is not four integers.
    """
    fanouts = [int(fanout) for fanout in fanouts]
    if not fanouts or min(fanouts) < -1:
        raise ValueError(f"fan-outs are one or more counts >= 0 (or -1 for all neighbours), not {fanouts}")
    seeds = np.asarray(seeds)
    if seeds.ndim != 1 or (len(seeds) and seeds.dtype.kind not in "iu"):
        raise ValueError(f"seeds are a vector of integer local ids, not {seeds.dtype}{list(seeds.shape)}")
    seeds = seeds.astype(np.int64)
    ordered = np.sort(seeds)
    if len(seeds) and (ordered[0] < 0 or ordered[-1] >= graph.num_owned or (ordered[1:] == ordered[:-1]).any()):
        raise ValueError(f"seeds must be distinct solid nodes, local ids 0..{graph.num_owned - 1}")
    base = stream_key(key)
    blocks, dst = [], seeds
    for layer in range(len(fanouts) - 1, -1, -1):
        block = _sample_layer(graph, dst, fanouts[layer], np.uint64(splitmix64(base ^ np.uint64(layer))))
        blocks.append(block)
        dst = block.src[:block.num_solid]
    return blocks[::-1]
