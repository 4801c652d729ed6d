import numpy as np
import pytest

from supergcn.distributed.comm import Communicator
from supergcn.errors import SuperGCNError


class TwoRanks:
    def Get_rank(self):
        return 0

    def Get_size(self):
        return 2


@pytest.mark.parametrize("side", ["send", "receive"])
def test_an_exchange_past_mpis_int_displacements_is_refused_before_mpi_sees_it(side):
    """Counts and displacements travel in rows, as C ints: two peers of 1.5e9 rows each
    would put the second displacement past 2^31 - 1 (one peer's count alone would not)."""
    big = np.array([0, 1_500_000_000], dtype=np.int64), np.array([1_500_000_000, 1_500_000_000], dtype=np.int64)
    send_counts, recv_counts = big if side == "receive" else big[::-1]
    with pytest.raises(SuperGCNError, match="more than 2\\^31-1 rows in one exchange"):
        Communicator(TwoRanks()).ialltoallv(np.zeros((1, 4), dtype=np.float32), send_counts, recv_counts)
