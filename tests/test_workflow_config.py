"""The config's checks beyond the schema: the P the machine is measured at."""

import pytest

from supergcn.workflow_config import measured_process_counts


@pytest.mark.parametrize("counts, threads, cores, within, measured", [
    ([2, 4, 8], 1, 2, True, [2]),  # a 2-core laptop: P = 2 alone, not 8 ranks taking turns on 2 cores
    ([8, 2, 4], 1, 16, True, [2, 4, 8]),  # the cores for all of them: every P, ascending
    ([2, 4, 8], 2, 8, True, [2, 4]),  # 8 ranks x 2 threads > 8 cores
    ([4, 8], 1, 2, True, [4]),  # none fits: the smallest stays (and its result says oversubscribed)
    ([2, 4, 8], 1, 2, False, [2, 4, 8]),  # a cluster overlay: each P a job with its own nodes
])
def test_the_measured_process_counts_stay_within_the_cores(counts, threads, cores, within, measured):
    assert measured_process_counts({"process_counts": counts, "within_cores": within}, threads, cores) == measured


def test_within_cores_is_the_default():
    assert measured_process_counts({"process_counts": [2, 4]}, 1, 2) == [2]
