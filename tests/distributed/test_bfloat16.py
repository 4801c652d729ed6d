"""bfloat16 rows on the wire (``--bits 16``): tests/distributed/bfloat16_job.py under MPI."""

from pathlib import Path

from conftest import run_rank_job


def test_bfloat16_rows_arrive_rounded_to_nearest_even_in_half_the_bytes():
    run_rank_job(Path(__file__).with_name("bfloat16_job.py"), 3)
