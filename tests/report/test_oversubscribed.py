"""A run's header says whether its ranks shared cores: per host, ranks x threads against the
CPUs in the union of the ranks' affinity masks (what the runs and scaling tables mark)."""

import pytest

from supergcn.train.provenance import oversubscribed


class Ranks:
    """A communicator whose ranks report these (host, CPUs they may run on)."""

    def __init__(self, *ranks):
        self.ranks = list(ranks)

    def allgather(self, _):
        return self.ranks


@pytest.mark.parametrize("ranks, threads, cores, expected", [
    # make run's P = 4 on a 2-core machine, one thread a rank
    ([("vm", [0, 1])] * 4, 1, {"vm": 2}, True),
    ([("vm", [0, 1])] * 2, 1, {"vm": 2}, False),
    ([("vm", [0, 1])] * 2, 2, {"vm": 2}, True),
    # ranks bound to a core each: their masks together hold both
    ([("vm", [0]), ("vm", [1])], 1, {"vm": 2}, False),
    ([("vm", [0]), ("vm", [0])], 1, {"vm": 1}, True),
    # two nodes of two ranks on two cores each; one node with three ranks is enough
    ([("a", [0, 1]), ("a", [0, 1]), ("b", [0, 1]), ("b", [0, 1])], 1, {"a": 2, "b": 2}, False),
    ([("a", [0, 1])] * 3 + [("b", [0, 1])], 1, {"a": 2, "b": 2}, True),
])
def test_ranks_times_threads_beyond_a_hosts_cpus_are_oversubscribed(ranks, threads, cores, expected):
    record = oversubscribed(Ranks(*ranks), threads)
    assert record == {"threads_per_rank": threads, "cores_by_host": cores, "oversubscribed": expected}
