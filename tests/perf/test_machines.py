"""This machine's measured profile: what its description says of the P behind it."""

from supergcn.perf.machines import measured_at


def test_a_profile_says_at_which_p_it_was_measured_and_which_were_crowded():
    assert measured_at([{"num_ranks": 2, "oversubscribed": False}]) == ", at P = 2"
    assert measured_at([{"num_ranks": 2, "oversubscribed": False}, {"num_ranks": 4, "oversubscribed": True},
                        {"num_ranks": 8, "oversubscribed": True}]) == \
        ", at P = 2, 4, 8; P = 4, 8 oversubscribed: more ranks than cores"
