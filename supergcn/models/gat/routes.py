"""Index arrays of one rank's attention exchange (:mod:`supergcn.models.gat.online_softmax`),
derived from its plan: which owned edges form each PRE row it sends, in which order its
rows and scalars go out, and where the received PRE and POST rows and their scalars lie.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from supergcn.kernels.ranges import block_starts, concatenated_ranges
from supergcn.plan.rank_plan import RankPlan


def _long(values: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(values, dtype=np.int64))


def flat_positions(pre_counts: np.ndarray, post_counts: np.ndarray, heads: int) -> tuple[np.ndarray, np.ndarray]:
    """Where each scalar lies in a flat buffer of per-rank blocks, each block holding its
    PRE rows (2H values each: s, then m) and then its POST rows (H values each).

    Args:
        pre_counts: PRE rows per rank.
        post_counts: POST rows per rank.
        heads: H.

    Returns:
        ``(pre, post)``: the positions of the PRE rows' values (rows x 2H) and of the POST
        rows' (rows x H), rows in rank order.
    """
    block_start = block_starts(2 * heads * pre_counts + heads * post_counts)
    pre_rank = np.repeat(np.arange(len(pre_counts)), pre_counts)
    post_rank = np.repeat(np.arange(len(post_counts)), post_counts)
    pre_row = block_start[pre_rank] + 2 * heads * (np.arange(len(pre_rank)) - block_starts(pre_counts)[pre_rank])
    post_row = (block_start[post_rank] + 2 * heads * pre_counts[post_rank]
                + heads * (np.arange(len(post_rank)) - block_starts(post_counts)[post_rank]))
    return (pre_row[:, None] + np.arange(2 * heads), post_row[:, None] + np.arange(heads))


@dataclass
class AttentionRoutes:
    """Index arrays of one rank's attention exchange, derived from its plan (see the
    module docstring). Sender side: the PRE rows' edges (row, owned source), the POST
    sources, and the send-buffer order. Receiver side: the PRE rows' buffer rows and
    destinations, the POST rows' buffer rows, and the *direct* edges (local sources
    without self loops, one self loop per node, POST rows), whose sources index the
    owned rows followed by the POST rows received.

    Args: the fields, as :meth:`of` derives them.
    """

    send_pre_counts: np.ndarray
    send_post_counts: np.ndarray
    recv_pre_counts: np.ndarray
    recv_post_counts: np.ndarray
    pre_edge_row: torch.Tensor
    pre_edge_source: torch.Tensor
    post_sources: torch.Tensor
    send_order: torch.Tensor
    pre_buffer_rows: torch.Tensor
    pre_destination: torch.Tensor
    post_buffer_rows: torch.Tensor
    direct_destination: torch.Tensor
    direct_source: torch.Tensor

    @classmethod
    def of(cls, plan: RankPlan, recv_pre_counts: np.ndarray) -> "AttentionRoutes":
        """The routes of ``plan``, given the PRE rows each rank sends this one.

        Args:
            plan: the rank's plan.
            recv_pre_counts: PRE rows received from each rank (the senders' ``send_pre_counts``).

        Returns:
            The rank's routes.
        """
        n = plan.num_owned
        recv_post_counts = plan.recv_counts - recv_pre_counts
        recv_start = block_starts(plan.recv_counts)
        pre_rows = concatenated_ranges(recv_start, recv_pre_counts)
        post_rows = concatenated_ranges(recv_start + recv_pre_counts, recv_post_counts)
        index_among = np.full(int(plan.recv_counts.sum()), -1, dtype=np.int64)
        index_among[pre_rows] = np.arange(len(pre_rows))
        index_among[post_rows] = np.arange(len(post_rows))
        is_pre = np.zeros(len(index_among), dtype=bool)
        is_pre[pre_rows] = True
        remote_destination = np.repeat(np.arange(n), np.diff(plan.remote_indptr))
        remote_pre = is_pre[plan.remote_indices]
        pre_destination = np.empty(len(pre_rows), dtype=np.int64)
        pre_destination[index_among[plan.remote_indices[remote_pre]]] = remote_destination[remote_pre]
        local_destination = np.repeat(np.arange(n), np.diff(plan.local_indptr))
        not_loop = plan.local_indices != local_destination
        direct_destination = np.concatenate([local_destination[not_loop], np.arange(n),
                                             remote_destination[~remote_pre]])
        direct_source = np.concatenate([plan.local_indices[not_loop], np.arange(n),
                                        n + index_among[plan.remote_indices[~remote_pre]]])
        pre_positions, post_positions = plan.send_positions()
        return cls(send_pre_counts=plan.send_pre_counts, send_post_counts=plan.send_post_counts,
                   recv_pre_counts=recv_pre_counts, recv_post_counts=recv_post_counts,
                   pre_edge_row=_long(np.repeat(np.arange(len(plan.pre_indptr) - 1), np.diff(plan.pre_indptr))),
                   pre_edge_source=_long(plan.pre_indices), post_sources=_long(plan.post_send_index),
                   send_order=_long(np.argsort(np.concatenate([pre_positions, post_positions]))),
                   pre_buffer_rows=_long(pre_rows), pre_destination=_long(pre_destination),
                   post_buffer_rows=_long(post_rows), direct_destination=_long(direct_destination),
                   direct_source=_long(direct_source))

    @property
    def num_pre_rows(self) -> int:
        """PRE rows this rank sends."""
        return int(self.send_pre_counts.sum())

    def scalar_layout(self, heads: int) -> dict[str, torch.Tensor | np.ndarray]:
        """The flat scalar buffers of ``heads`` heads (:func:`flat_positions`): the order
        that assembles the sent one, the positions that read the received one, and the
        counts of each."""
        sent_pre, sent_post = flat_positions(self.send_pre_counts, self.send_post_counts, heads)
        got_pre, got_post = flat_positions(self.recv_pre_counts, self.recv_post_counts, heads)
        return {"send_order": _long(np.argsort(np.concatenate([sent_pre.ravel(), sent_post.ravel()]))),
                "send_counts": 2 * heads * self.send_pre_counts + heads * self.send_post_counts,
                "recv_counts": 2 * heads * self.recv_pre_counts + heads * self.recv_post_counts,
                "recv_pre": _long(got_pre), "recv_post": _long(got_post)}
