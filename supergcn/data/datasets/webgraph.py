"""The BV-compressed graphs of the Laboratory for Web Algorithmics (WebGraph's ``BVGraph``).

A graph ``basename`` is ``basename.properties`` (Java properties: ``nodes``, ``arcs``,
``windowsize``, ``minintervallength``, ``zetak``, ``compressionflags``, ``version``) and
``basename.graph``, a bit stream (most significant bit first) that codes every node's
sorted successor list in node order. For node x, with the instantaneous codes

* unary(n): n zeros, then a one;
* gamma(n): n + 1 = 2^m + r, unary(m), then r in m bits;
* zeta_k(n): n + 1 in [2^(hk), 2^((h+1)k)): unary(h), then n + 1 - 2^(hk) in hk + k - 1
  bits when it is below 2^(hk), else (n + 1) >> 1 in hk + k - 1 bits and its low bit;

and nat(z) = 2z for z >= 0, -2z - 1 below (its inverse int(n)), the list is

1. the outdegree d, gamma; nothing more if d = 0;
2. (window > 0) a reference r, unary; r > 0 copies from node x - r's list: a block count
   (gamma) and that many blocks (gamma, all but the first plus one), alternately the
   number of successors to copy and to skip; after the last block the rest is copied if
   the count is even, skipped if odd;
3. (minimum interval length L > 0, successors left) an interval count (gamma), each
   interval's left end (the first x + int(gamma), then one past the previous interval's
   end + 1 + gamma: intervals never touch) and length (gamma + L);
4. the residuals, the successors left: the first x + int(zeta_k), each next the previous
   + 1 + zeta_k.

Only the default codes are read (``compressionflags`` empty: those above); other flags are
refused with the flag named. :func:`decode_bvgraph` decodes the whole stream in one
numba pass into CSR arrays, using the successors already decoded as the reference window.
(The tests write their fixtures with an encoder of their own, :mod:`supergcn.testing.bvgraph`.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from supergcn.errors import SuperGCNError
from supergcn.kernels.jit import njit
from supergcn.progress import running

#: What the decoder reads; anything else in ``compressionflags`` is refused.
DEFAULT_FLAGS = ""
SUPPORTED_VERSION = "0"


def read_properties(path: Path) -> dict[str, str]:
    """A Java properties file of ``key=value`` lines (``#`` comments)."""
    properties = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, value = line.split("=", 1)
            properties[key.strip()] = value.strip()
    return properties


@njit(cache=True)
def _bit(data, pos):
    """Bit ``pos`` of the stream; past its end, ones (every code then ends at once, and the
    caller's count of bits read shows the stream was too short)."""
    if pos >> 3 >= len(data):
        return 1
    return (data[pos >> 3] >> (7 - (pos & 7))) & 1


@njit(cache=True)
def _int(data, pos, bits):
    value = 0
    for _ in range(bits):
        value = (value << 1) | _bit(data, pos)
        pos += 1
    return value, pos


@njit(cache=True)
def _unary(data, pos):
    count = 0
    while _bit(data, pos) == 0:
        count += 1
        pos += 1
    return count, pos + 1


@njit(cache=True)
def _gamma(data, pos):
    msb, pos = _unary(data, pos)
    low, pos = _int(data, pos, msb)
    return ((1 << msb) | low) - 1, pos


@njit(cache=True)
def _zeta(data, pos, k):
    h, pos = _unary(data, pos)
    left = 1 << (h * k)
    m, pos = _int(data, pos, h * k + k - 1)
    if m < left:
        return m + left - 1, pos
    bit = _bit(data, pos)
    return (m << 1) + bit - 1, pos + 1


@njit(cache=True)
def _signed(n):
    return n >> 1 if n % 2 == 0 else -((n + 1) >> 1)


@njit(cache=True)
def _decode(data, num_nodes, window, min_interval, zeta_k, indptr, successors):
    """Every node's successors into ``successors`` (rows sorted), ``indptr`` filled;
    returns the bits read, or -1 - x if node x codes more successors than its degree or
    than there is room for, or a successor outside the graph. Each is checked before the
    writes it would cause: compiled, ``successors`` has no bounds check, and a damaged
    stream would write past it."""
    pos = 0
    cursor = 0
    total = len(successors)
    for x in range(num_nodes):
        indptr[x] = cursor
        degree, pos = _gamma(data, pos)
        if degree == 0:
            continue
        if cursor + degree > total:
            return -1 - x
        start = cursor
        if window > 0:
            reference, pos = _unary(data, pos)
            if reference > 0:
                if reference > x:
                    return -1 - x
                ref_start, ref_stop = indptr[x - reference], indptr[x - reference + 1]
                blocks, pos = _gamma(data, pos)
                index = ref_start
                copy = True
                for b in range(blocks):
                    length, pos = _gamma(data, pos)
                    if b > 0:
                        length += 1
                    if index + length > ref_stop or (copy and cursor - start + length > degree):
                        return -1 - x
                    if copy:
                        for i in range(index, index + length):
                            successors[cursor] = successors[i]
                            cursor += 1
                    index += length
                    copy = not copy
                if copy:  # the rest of the list
                    if cursor - start + ref_stop - index > degree:
                        return -1 - x
                    for i in range(index, ref_stop):
                        successors[cursor] = successors[i]
                        cursor += 1
        left_over = degree - (cursor - start)
        if min_interval > 0 and left_over > 0:
            intervals, pos = _gamma(data, pos)
            past_end = 0
            for i in range(intervals):
                gap, pos = _gamma(data, pos)
                first = x + _signed(gap) if i == 0 else past_end + 1 + gap
                length, pos = _gamma(data, pos)
                length += min_interval
                if length > left_over or first < 0 or first + length > num_nodes:
                    return -1 - x
                for v in range(first, first + length):
                    successors[cursor] = v
                    cursor += 1
                left_over -= length
                past_end = first + length
        previous = 0
        for i in range(left_over):
            gap, pos = _zeta(data, pos, zeta_k)
            value = x + _signed(gap) if i == 0 else previous + 1 + gap
            if value < 0 or value >= num_nodes:
                return -1 - x
            successors[cursor] = value
            cursor += 1
            previous = value
        successors[start:cursor].sort()
    indptr[num_nodes] = cursor
    return pos


def decode_bvgraph(basename: Path) -> tuple[np.ndarray, np.ndarray]:
    """``(indptr int64, successors)`` of the BV graph ``basename`` (see the module
    docstring); successors are int32 below 2^31 nodes.

    Raises:
        SuperGCNError: a missing file, codes other than the defaults, or a stream that
            does not decode to the node and arc counts its properties give.
    """
    properties_path, graph_path = basename.with_suffix(".properties"), basename.with_suffix(".graph")
    missing = [str(p) for p in (properties_path, graph_path) if not p.is_file()]
    if missing:
        raise SuperGCNError(f"WebGraph files not found: {', '.join(missing)}",
                            "download the graph's .graph and .properties files from the LAW and put them there")
    properties = read_properties(properties_path)
    try:
        num_nodes, num_arcs = int(properties["nodes"]), int(properties["arcs"])
        window = int(properties.get("windowsize", 7))
        min_interval = int(properties.get("minintervallength", 4))
        zeta_k = int(properties.get("zetak", 3))
    except (KeyError, ValueError) as exc:
        raise SuperGCNError(f"{properties_path} lacks a number it needs ({exc})",
                            "download the .properties file again") from exc
    flags = properties.get("compressionflags", DEFAULT_FLAGS)
    if flags != DEFAULT_FLAGS or properties.get("version", SUPPORTED_VERSION) != SUPPORTED_VERSION:
        raise SuperGCNError(f"{properties_path} asks for compressionflags={flags!r}, version="
                            f"{properties.get('version')!r}; supergcn reads the default BV codes of version 0",
                            "recompress it with WebGraph's defaults (java it.unimi.dsi.webgraph.BVGraph -g BVGraph "
                            "<basename> <new basename>)")
    data = np.fromfile(graph_path, dtype=np.uint8)
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    successors = np.empty(num_arcs, dtype=np.int32 if num_nodes < 2**31 else np.int64)
    with running(f"prepare: decoding {graph_path.name}"):
        bits = _decode(data, num_nodes, window, min_interval, zeta_k, indptr, successors)
    if bits < 0:
        raise SuperGCNError(f"{graph_path} is damaged: node {-1 - bits}'s successor list does not decode within "
                            f"the {num_nodes:,} nodes and {num_arcs:,} arcs of {properties_path.name}",
                            "download the .graph file again")
    if indptr[-1] != num_arcs or bits > 8 * len(data):
        raise SuperGCNError(f"{graph_path} decodes to {int(indptr[-1]):,} arcs in {bits:,} bits, not the "
                            f"{num_arcs:,} arcs of {properties_path.name} in its {len(data):,} bytes",
                            "the file is truncated or belongs to another graph: download it again")
    return indptr, successors
