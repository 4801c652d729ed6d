"""One rank's communication plan: the operators of its aggregation and its exchange counts.

Ids are the renumbered ones of the partition: rank ``r`` owns ``offset .. offset+n_r-1``
and refers to them locally as ``0 .. n_r-1``. For a destination node v on rank i, the
mean aggregation splits into

    deg(v) * (ÂX)[v] = sum_{u in N(v), u on i} X[u] + sum_{j != i} sum_{u in N(v), u on j} X[u].

Every cut edge (u on j, v on i) is served in one of two ways:

* PRE — rank j sums all its pre-served sources of v into one partial row and sends it;
  rank i adds that row into v.
* POST — rank j sends u's row once; rank i adds it into every v it serves.

Buffers. Rank j's send buffer holds, for each destination i in rank order, first its PRE
partial rows (ordered by destination id) and then its POST raw rows (ordered by source
id). Rank i's receive buffer is the concatenation over sources j of those chunks, so
Alltoallv with ``send_counts`` / ``recv_counts`` moves the data.

A :class:`RankPlan` holds (all ids local to the rank):

* ``local_indptr``/``local_indices`` — owned destinations -> owned sources;
* ``pre_indptr``/``pre_indices`` — PRE partial rows (all destinations, in send order) ->
  owned sources; ``send_pre_counts[i]`` of them go to rank i;
* ``post_send_index`` — owned sources sent raw, ``send_post_counts[i]`` to rank i;
* ``remote_indptr``/``remote_indices`` — owned destinations -> receive-buffer rows;
* ``recv_counts[j]`` — rows received from rank j; ``in_degree`` — global deg(v);
* ``owned_old_ids`` — the graph's own ids of the owned nodes, so a rank reads its rows of
  the graph without the partition (an N-long array) or its renumbering.

How plans are built: :mod:`supergcn.plan.builder`; how they are stored: :mod:`supergcn.plan.store`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from supergcn.kernels.ranges import block_starts, concatenated_ranges


@dataclass
class RankPlan:
    """One rank's plan (module docstring); ids are local to the rank unless said otherwise.

    Args:
        rank: the rank.
        num_ranks: the number of ranks, P.
        offset: the first new id the rank owns.
        local_indptr: CSR pointers of owned destinations <- owned sources.
        local_indices: its owned sources.
        pre_indptr: CSR pointers of the PRE partial rows, in send order.
        pre_indices: the owned sources each PRE row sums.
        send_pre_counts: PRE rows sent to each rank.
        post_send_index: the owned sources sent raw, in send order.
        send_post_counts: POST rows sent to each rank.
        recv_counts: rows received from each rank.
        remote_indptr: CSR pointers of owned destinations <- receive-buffer rows.
        remote_indices: their receive-buffer rows.
        in_degree: the global in-degree of each owned node.
        owned_old_ids: the graph's own id of each owned node.
    """
    rank: int
    num_ranks: int
    offset: int
    local_indptr: np.ndarray
    local_indices: np.ndarray
    pre_indptr: np.ndarray
    pre_indices: np.ndarray
    send_pre_counts: np.ndarray
    post_send_index: np.ndarray
    send_post_counts: np.ndarray
    recv_counts: np.ndarray
    remote_indptr: np.ndarray
    remote_indices: np.ndarray
    in_degree: np.ndarray
    owned_old_ids: np.ndarray

    @property
    def num_owned(self) -> int:
        """Nodes the rank owns, n_r."""
        return len(self.local_indptr) - 1

    @property
    def send_counts(self) -> np.ndarray:
        """Rows sent to each rank: its PRE rows and its POST rows."""
        return self.send_pre_counts + self.send_post_counts

    def contradiction(self) -> str | None:
        """What in this plan disagrees with the rest of it (counts of another length or
        below zero, a CSR whose pointers do not run from 0 to its entries, an index past
        its matrix), or None. The kernels index with these arrays unchecked.

        Returns:
            The first contradiction found, in words, or None.
        """
        n, ranks = self.num_owned, self.num_ranks
        for name in ("send_pre_counts", "send_post_counts", "recv_counts"):
            counts = getattr(self, name)
            if counts.shape != (ranks,) or (counts < 0).any():
                return f"{name} holds {counts.size} values, {int((counts < 0).sum())} below zero, not {ranks} counts"
        post_rows = int(self.send_post_counts.sum())
        for name, length in (("in_degree", n), ("owned_old_ids", n), ("post_send_index", post_rows)):
            if len(getattr(self, name)) != length:
                return f"{name} has {len(getattr(self, name)):,} entries, not {length:,}"
        if not within(self.post_send_index, n):
            return f"post_send_index names owned nodes outside 0..{n - 1}"
        for name, indptr, indices, rows, columns in (
                ("local", self.local_indptr, self.local_indices, n, n),
                ("pre", self.pre_indptr, self.pre_indices, int(self.send_pre_counts.sum()), n),
                ("remote", self.remote_indptr, self.remote_indices, n, int(self.recv_counts.sum()))):
            if (len(indptr) != rows + 1 or indptr[0] != 0 or indptr[-1] != len(indices)
                    or (np.diff(indptr) < 0).any()):
                return f"the {name} CSR's pointers do not run from 0 to its {len(indices):,} entries over {rows:,} rows"
            if not within(indices, columns):
                return f"the {name} CSR indexes columns outside 0..{columns - 1}"
        return None

    def send_positions(self) -> tuple[np.ndarray, np.ndarray]:
        """Rows of the send buffer that receive the PRE partial rows and the POST rows.

        Returns:
            ``(pre_positions, post_positions)``: the send-buffer row of each PRE row (in
            ``pre_indptr`` order) and of each POST row (in ``post_send_index`` order).
        """
        chunk_start = block_starts(self.send_counts)
        pre_pos = concatenated_ranges(chunk_start, self.send_pre_counts)
        post_pos = concatenated_ranges(chunk_start + self.send_pre_counts, self.send_post_counts)
        return pre_pos, post_pos

    def matrices(self) -> dict[str, sp.csr_matrix]:
        """The plan's operators as scipy CSR matrices with unit weights:

        * ``local`` (n x n): owned destinations <- owned sources;
        * ``send`` (send rows x n): each send-buffer row, a PRE row summing its sources or
          a POST row copying one source, in buffer order;
        * ``remote`` (n x received rows): owned destinations <- receive-buffer rows.

        Returns:
            ``local``, ``send`` and ``remote`` -> float32 CSR matrices.
        """
        def csr(indptr, indices, num_cols):
            return sp.csr_matrix((np.ones(len(indices), dtype=np.float32), indices, indptr),
                                 shape=(len(indptr) - 1, num_cols))
        pre_pos, post_pos = self.send_positions()
        send_rows = np.concatenate([np.repeat(pre_pos, np.diff(self.pre_indptr)), post_pos])
        send_cols = np.concatenate([self.pre_indices, self.post_send_index]).astype(np.int64)
        send = sp.csr_matrix((np.ones(len(send_rows), dtype=np.float32), (send_rows, send_cols)),
                             shape=(int(self.send_counts.sum()), self.num_owned))
        return {"local": csr(self.local_indptr, self.local_indices, self.num_owned), "send": send,
                "remote": csr(self.remote_indptr, self.remote_indices, int(self.recv_counts.sum()))}


def within(values: np.ndarray, upper: int) -> bool:
    """Whether every value lies in 0..upper-1.

    Args:
        values: integers (possibly empty).
        upper: the bound.

    Returns:
        True when ``values`` is empty or lies in range.
    """
    return not len(values) or (int(values.min()) >= 0 and int(values.max()) < upper)
