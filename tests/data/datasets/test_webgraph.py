"""WebGraph's BV format: a hand-worked stream, round trips of every code path, damage."""

import numpy as np
import pytest

from supergcn.data.datasets.webgraph import _decode, decode_bvgraph
from supergcn.errors import SuperGCNError
from supergcn.testing.bvgraph import _BitWriter, encode_bvgraph

PROPERTIES = ("version=0\nnodes=4\narcs=6\nwindowsize=7\nminintervallength=2\nzetak=3\ncompressionflags=\n")
# Worked by hand from the codes (module docstring), nodes 0..3:
#   node 0, [1, 2, 3]: gamma(3) 00100, no reference 1, one interval gamma(1) 010 starting at
#     0 + int(gamma(2) = 011) = 1, of 2 + gamma(1) = 010 -> 3 nodes;
#   node 1, [0, 2, 3]: gamma(3) 00100, reference 1 (unary 01), 2 blocks gamma(2) 011:
#     copy 0 (gamma 1), skip 1 (gamma(0) 1), the rest (2, 3) copied; no interval gamma(0)
#     1; residual 0 = 1 + int(1): zeta_3(1) = 1 01 0;
#   nodes 2, 3: gamma(0) 1 each.
HAND_WORKED = bytes([0b00100101, 0b00110100, 0b01000101, 0b11111010, 0b11000000])


def test_a_hand_worked_stream_decodes_and_is_what_the_encoder_writes(tmp_path):
    (tmp_path / "g.graph").write_bytes(HAND_WORKED)
    (tmp_path / "g.properties").write_text(PROPERTIES)
    indptr, successors = decode_bvgraph(tmp_path / "g")
    assert indptr.tolist() == [0, 3, 6, 6, 6] and successors.tolist() == [1, 2, 3, 0, 2, 3]
    encode_bvgraph(tmp_path / "e", [[1, 2, 3], [0, 2, 3], [], []], window=7, min_interval=2, zeta_k=3)
    assert (tmp_path / "e.graph").read_bytes() == HAND_WORKED


def random_lists(num_nodes, seed=0):
    """Successor lists with shared neighbourhoods (references), runs (intervals) and
    scattered ids (residuals, some below the node, some far above)."""
    rng = np.random.default_rng(seed)
    lists = []
    for x in range(num_nodes):
        successors = set(rng.integers(0, num_nodes, rng.integers(0, 25)).tolist())
        if lists and rng.random() < 0.6:
            successors |= {v for v in lists[-1] if rng.random() < 0.7}
        if rng.random() < 0.3:
            first = int(rng.integers(0, num_nodes - 20))
            successors |= set(range(first, first + int(rng.integers(2, 20))))
        lists.append(sorted(successors))
    return lists


@pytest.mark.parametrize("window, min_interval, zeta_k", [(7, 4, 3), (0, 0, 1), (3, 2, 5), (1, 1, 2)])
def test_round_trips_through_every_code_path(tmp_path, window, min_interval, zeta_k):
    lists = random_lists(800)
    encode_bvgraph(tmp_path / "g", lists, window, min_interval, zeta_k)
    indptr, successors = decode_bvgraph(tmp_path / "g")
    assert [successors[indptr[x]:indptr[x + 1]].tolist() for x in range(800)] == lists


def test_damage_and_other_codes_are_refused_in_one_line(tmp_path):
    encode_bvgraph(tmp_path / "g", random_lists(300))
    data = (tmp_path / "g.graph").read_bytes()
    (tmp_path / "g.graph").write_bytes(data[:len(data) // 2])
    with pytest.raises(SuperGCNError, match="is damaged|is truncated"):
        decode_bvgraph(tmp_path / "g")
    (tmp_path / "g.graph").write_bytes(data)
    properties = (tmp_path / "g.properties").read_text()
    (tmp_path / "g.properties").write_text(properties.replace("compressionflags=", "compressionflags=RESIDUALS_GAMMA"))
    with pytest.raises(SuperGCNError, match="compressionflags='RESIDUALS_GAMMA'.*recompress it"):
        decode_bvgraph(tmp_path / "g")


def test_a_copied_list_longer_than_the_degree_is_refused_before_it_is_written(tmp_path):
    """Node 1 declares one successor, then copies all four of node 0's: the copy would run
    past the arcs the properties give room for (5), and is refused before writing."""
    stream = _BitWriter()
    stream.gamma(4)  # node 0: degree 4,
    stream.unary(0)  # no reference,
    stream.gamma(1)  # one interval: from 0 + 0,
    stream.gamma(0)
    stream.gamma(2)  # of 2 + 2 nodes
    stream.gamma(1)  # node 1: degree 1,
    stream.unary(1)  # node 0's list,
    stream.gamma(0)  # no blocks: copy it all
    stream.gamma(0)  # nodes 2 and 3: degree 0
    stream.gamma(0)
    # Room for 5 successors, followed by guards that the decoder must leave alone.
    room = np.full(9, -7, dtype=np.int32)
    indptr = np.zeros(5, dtype=np.int64)
    data = np.frombuffer(stream.to_bytes(), dtype=np.uint8)
    assert _decode(data, 4, 7, 2, 3, indptr, room[:5]) == -1 - 1
    assert room[5:].tolist() == [-7] * 4
    (tmp_path / "g.graph").write_bytes(stream.to_bytes())
    (tmp_path / "g.properties").write_text(PROPERTIES.replace("arcs=6", "arcs=5"))
    with pytest.raises(SuperGCNError, match="is damaged: node 1's"):
        decode_bvgraph(tmp_path / "g")
