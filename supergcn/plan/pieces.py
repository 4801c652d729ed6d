"""What the builder's first pass leaves for the senders: their rows, kept on disk.

The first pass (:mod:`supergcn.plan.builder`) takes one destination rank at a time and
works out what every sender sends it; the second pass assembles each sender's plan from
those pieces in destination order. At P = 8,192 nearly every pair has cut edges (20 M
pairs for 50 M adjacency entries), so the pieces and the per-pair records stay in files.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from supergcn.kernels.ranges import block_starts, concatenated_ranges

PIECES = ("pre_lengths", "pre_sources", "post_sources")
#: The per-pair record columns a sender's assembly reads.
SENDER_COLUMNS = ("dst", "pre_rows", "post_rows", *(f"{name}_{end}" for name in PIECES for end in ("start", "count")))


class SenderPieces:
    """What each destination rank's pass leaves for the senders, appended to files in
    ``directory``: the PRE rows' lengths and sources and the POST rows' sources (local ids
    of the sender, in ``piece_dtype``), and one record per pair (j -> i) with cut edges —
    its statistics and where its pieces start — as int64 columns of their own.

    At P = 8,192 nearly every pair has cut edges (20 M pairs for 50 M adjacency entries), so
    the records stay on disk: :meth:`finish` rewrites each column in sender order, one
    column in memory at a time, and a sender's records are then one contiguous read, with
    no memory map whose pages would stay resident.
    """

    FILES = PIECES

    def __init__(self, directory: Path, piece_dtype: np.dtype) -> None:
        self.directory = directory
        self.piece_dtype = piece_dtype
        self.files: dict[str, object] = {}
        self.written = dict.fromkeys(self.FILES, 0)
        self.bounds = np.zeros(1, dtype=np.int64)
        self.mapped: dict[str, np.ndarray] | None = None

    def _append(self, name: str, values: np.ndarray, dtype) -> None:
        if name not in self.files:
            self.files[name] = open(self.directory / f"{name}.bin", "wb")
        self.files[name].write(np.ascontiguousarray(values, dtype=dtype).tobytes())

    def add(self, receiver: int, senders: np.ndarray, counts: dict[str, np.ndarray], arrays: dict[str, np.ndarray],
            stats: dict[str, np.ndarray]) -> None:
        """``arrays`` hold the receiver's pieces in sender order, ``counts`` each sender's share."""
        record = {"src": senders, "dst": np.full(len(senders), receiver, dtype=np.int64), **stats}
        for name in self.FILES:
            record[f"{name}_start"] = self.written[name] + block_starts(counts[name])
            record[f"{name}_count"] = counts[name]
            self._append(name, arrays[name], self.piece_dtype)
            self.written[name] += int(counts[name].sum())
        for name, values in record.items():
            self._append(f"pair-{name}", values, np.int64)

    def _path(self, name: str) -> Path:
        return self.directory / f"{name}.bin"

    def finish(self, num_ranks: int) -> None:
        """Put every record column in sender order (stable: receivers ascending within a
        sender) and note where each sender's records start."""
        for handle in self.files.values():
            handle.close()
        order = np.argsort(np.fromfile(self._path("pair-src"), dtype=np.int64), kind="stable")
        for name in [name for name in self.files if name.startswith("pair-")]:
            np.fromfile(self._path(name), dtype=np.int64)[order].tofile(self._path(name))
        del order
        self.bounds = np.searchsorted(self.column("src"), np.arange(num_ranks + 1))

    def column(self, name: str) -> np.ndarray:
        """A record column, whole, in sender order."""
        return np.fromfile(self._path(f"pair-{name}"), dtype=np.int64)

    def records(self, sender: int) -> dict[str, np.ndarray]:
        """The :data:`SENDER_COLUMNS` of ``sender``'s records, one read each."""
        lo, hi = int(self.bounds[sender]), int(self.bounds[sender + 1])
        return {name: np.fromfile(self._path(f"pair-{name}"), dtype=np.int64, count=hi - lo, offset=8 * lo)
                for name in SENDER_COLUMNS}

    def pieces(self, records: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """A sender's pieces, in receiver order, as int64. The piece files stay mapped for
        the whole assembly (a sender's pieces lie in every receiver's block; mapping them
        anew per sender faulted each page P times): their pages, 4 B per piece below 2^31
        nodes, may all end up resident."""
        if self.mapped is None:
            self.mapped = {name: np.memmap(self._path(name), dtype=self.piece_dtype, mode="r")
                           if self.written[name] else np.empty(0, dtype=self.piece_dtype) for name in self.FILES}
        return {name: self.mapped[name][concatenated_ranges(records[f"{name}_start"], records[f"{name}_count"])]
                .astype(np.int64) for name in self.FILES}

    def remove(self) -> None:
        self.mapped = None
        for handle in self.files.values():
            Path(handle.name).unlink()
