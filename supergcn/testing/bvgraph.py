"""A writer of WebGraph's BV format (:mod:`supergcn.data.datasets.webgraph` reads it), for
the tests' fixtures and the loader benchmark: every list refers to the previous one when
they share successors, runs of at least the minimum interval length become intervals, the
rest residuals."""

from __future__ import annotations

from pathlib import Path

import numpy as np


class _BitWriter:
    def __init__(self) -> None:
        self.bits: list[int] = []

    def int(self, value: int, width: int) -> None:
        self.bits.extend((value >> (width - 1 - i)) & 1 for i in range(width))

    def unary(self, n: int) -> None:
        self.bits.extend([0] * n + [1])

    def gamma(self, n: int) -> None:
        msb = (n + 1).bit_length() - 1
        self.unary(msb)
        self.int(n + 1 - (1 << msb), msb)

    def zeta(self, n: int, k: int) -> None:
        value = n + 1
        h = ((value).bit_length() - 1) // k
        self.unary(h)
        left = 1 << (h * k)
        if value - left < left:
            self.int(value - left, h * k + k - 1)
        else:
            self.int(value >> 1, h * k + k - 1)
            self.int(value & 1, 1)

    def to_bytes(self) -> bytes:
        padded = self.bits + [0] * (-len(self.bits) % 8)
        return np.packbits(np.array(padded, dtype=np.uint8)).tobytes()


def _nat(z: int) -> int:
    return 2 * z if z >= 0 else -2 * z - 1


def encode_bvgraph(basename: Path, lists: list[list[int]], window: int = 7, min_interval: int = 4,
                   zeta_k: int = 3) -> None:
    """Write ``lists`` (sorted, distinct successors per node) as the BV graph ``basename``:
    each list refers to the previous one when that shares successors, intervals of at
    least ``min_interval`` consecutive ids, the rest as residuals (for the tests)."""
    out = _BitWriter()
    for x, successors in enumerate(lists):
        out.gamma(len(successors))
        if not successors:
            continue
        remaining = list(successors)
        if window > 0:
            reference = 1 if x > 0 and set(lists[x - 1]) & set(successors) else 0
            out.unary(reference)
            if reference:
                members = [v in set(successors) for v in lists[x - 1]]
                runs, copy, length = [], True, 0
                for member in members:
                    if member == copy:
                        length += 1
                    else:
                        runs.append(length)
                        copy, length = not copy, 1
                if copy:  # a final copy run is implicit
                    runs.append(length)
                    runs.pop()
                else:
                    runs.append(length)
                out.gamma(len(runs))
                for i, run in enumerate(runs):
                    out.gamma(run if i == 0 else run - 1)
                copied = {v for v, member in zip(lists[x - 1], members) if member}
                remaining = [v for v in successors if v not in copied]
        if min_interval > 0 and remaining:
            intervals, residuals, i = [], [], 0
            while i < len(remaining):
                j = i
                while j + 1 < len(remaining) and remaining[j + 1] == remaining[j] + 1:
                    j += 1
                if j - i + 1 >= min_interval:
                    intervals.append((remaining[i], j - i + 1))
                else:
                    residuals.extend(remaining[i:j + 1])
                i = j + 1
            out.gamma(len(intervals))
            past_end = 0
            for index, (first, length) in enumerate(intervals):
                out.gamma(_nat(first - x) if index == 0 else first - past_end - 1)
                out.gamma(length - min_interval)
                past_end = first + length
            remaining = residuals
        previous = 0
        for index, value in enumerate(remaining):
            out.zeta(_nat(value - x) if index == 0 else value - previous - 1, zeta_k)
            previous = value
    basename.with_suffix(".graph").write_bytes(out.to_bytes())
    basename.with_suffix(".properties").write_text(
        f"#BVGraph properties\ngraphclass=it.unimi.dsi.webgraph.BVGraph\nversion=0\nnodes={len(lists)}\n"
        f"arcs={sum(map(len, lists))}\nwindowsize={window}\nmaxrefcount=3\nminintervallength={min_interval}\n"
        f"zetak={zeta_k}\ncompressionflags=\n")
