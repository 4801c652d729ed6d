import ctypes.util

import numpy as np
import pymetis
import pytest
from test_metis import grid_graph, imbalance

from supergcn.errors import SuperGCNError
from supergcn.partition import libmetis
from supergcn.partition.metis import partition_graph
from supergcn.partition.store import Engine, run_partition


@pytest.fixture
def metis_library():
    """The METIS library the project installs (the cmeel-metis wheel), found afresh."""
    libmetis.load_metis.cache_clear()
    assert "cmeel.prefix" in libmetis.library_path(), "the cmeel-metis wheel's library comes first"
    yield libmetis.load_metis()
    libmetis.load_metis.cache_clear()


def test_the_seed_index_is_metis_own():
    """metis.h 5.1's option indices, as pymetis's binding of the same header numbers them."""
    assert libmetis.METIS_OPTION_SEED["5.1"] == pymetis.OptionKey.SEED


class FakeMetis:
    """The two calls of a METIS whose options put NCUTS at ``ncuts_index`` (refusing 0
    cuts, as METIS does) and fill ``METIS_NOPTIONS`` int32 slots with -1."""

    def __init__(self, ncuts_index):
        self.ncuts_index = ncuts_index

    def METIS_SetDefaultOptions(self, options):
        np.ctypeslib.as_array(ctypes.cast(options, ctypes.POINTER(ctypes.c_int32)), (libmetis.METIS_NOPTIONS,))[:] = -1
        return libmetis.METIS_OK

    def METIS_PartGraphKway(self, *args):
        options = np.ctypeslib.as_array(ctypes.cast(args[10], ctypes.POINTER(ctypes.c_int32)),
                                        (libmetis.METIS_NOPTIONS,))
        return libmetis.METIS_ERROR_INPUT if options[self.ncuts_index] == 0 else libmetis.METIS_OK


@pytest.mark.parametrize("version, ncuts_index", [("5.1", 7), ("5.2", 8)])
def test_the_seed_index_is_probed_for_metis_5_1_and_5_2(version, ncuts_index):
    index = libmetis.seed_option_index(FakeMetis(ncuts_index), np.dtype(np.int32), "libfake.so")
    assert index == libmetis.METIS_OPTION_SEED[version]


def test_each_constraint_is_balanced_on_its_own(metis_library):
    """The grid's training nodes all sit in its top rows: one combined weight leaves them
    unbalanced, METIS's ncon balances nodes, in-degree and training nodes each within its
    3 % (plus one node's weight)."""
    g = grid_graph()
    constraints = ("nodes", "in_degree", "train")
    separate = partition_graph(g, 4, constraints, separate_constraints=True)
    combined = partition_graph(g, 4, constraints, separate_constraints=False)
    weights = {"nodes": None, "in_degree": g.in_degree, "train": g.train_mask.astype(float)}
    for name, weight in weights.items():
        assert imbalance(separate.parts, weight, 4) <= 1.05, name
    assert imbalance(separate.parts, weights["train"], 4) < imbalance(combined.parts, weights["train"], 4)
    assert np.array_equal(separate.parts, partition_graph(g, 4, constraints, separate_constraints=True).parts)


def test_the_manifest_says_which_metis_ran(metis_library, tmp_path):
    """METIS balances the constraints each on its own unless told to fold them."""
    manifest = run_partition(grid_graph(), "h", 3, tmp_path / "p")
    assert manifest["engine"]["method"] == "METIS library k-way, one constraint per weight"
    folded = run_partition(grid_graph(), "h", 3, tmp_path / "q", engine=Engine(separate_constraints=False))
    assert folded["engine"]["method"] == "pymetis k-way, combined vertex weight"


def test_the_wheel_library_is_metis_5_2_with_32_bit_integers(metis_library):
    _, idx_t, seed_index = metis_library
    assert idx_t == np.int32 and seed_index == libmetis.METIS_OPTION_SEED["5.2"]


@pytest.mark.parametrize("entries, vertices, weight", [(2**31, 10, 0), (10, 2**31, 0), (10, 10, 2**31)])
def test_past_2_31_the_32_bit_library_names_kaminpar(entries, vertices, weight):
    with pytest.raises(SuperGCNError, match="32-bit integers") as raised:
        libmetis.check_fits(np.dtype(np.int32), entries, vertices, weight)
    assert "partition.engine to kaminpar" in str(raised.value)
    libmetis.check_fits(np.dtype(np.int32), 2**31 - 1, 2**31 - 1, 2**31 - 1)
    libmetis.check_fits(np.dtype(np.int64), 2**40, 2**35, 2**40)


def test_a_graph_past_2_31_entries_is_refused_before_its_adjacency_is_copied(metis_library, monkeypatch):
    """The graph's own count decides, before METIS's arrays (tens of GB at that size) are made."""
    graph = grid_graph()
    monkeypatch.setattr(type(graph), "num_edges", property(lambda self: 2**31 + 5))
    with pytest.raises(SuperGCNError, match="2,147,483,653 adjacency entries"):
        partition_graph(graph, 2)


def test_a_missing_library_is_named_with_the_fix(monkeypatch, tmp_path):
    libmetis.load_metis.cache_clear()
    monkeypatch.delenv(libmetis.LIBRARY_VARIABLE, raising=False)
    monkeypatch.setattr(libmetis, "WHEEL", "no-such-wheel")
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    with pytest.raises(SuperGCNError, match="not found") as raised:
        partition_graph(grid_graph(), 2, separate_constraints=True)
    assert "pip install cmeel-metis" in str(raised.value)
    libmetis.load_metis.cache_clear()
    monkeypatch.setenv(libmetis.LIBRARY_VARIABLE, str(tmp_path / "nothing.so"))
    with pytest.raises(SuperGCNError, match="not a usable METIS library"):
        partition_graph(grid_graph(), 2, separate_constraints=True)
    libmetis.load_metis.cache_clear()


def test_kaminpar_cannot_keep_constraints_separate(tmp_path):
    with pytest.raises(SuperGCNError, match="KaMinPar balances one combined weight: .* cannot be true — set it to "
                       "false or null"):
        run_partition(grid_graph(), "h", 2, tmp_path / "p", engine=Engine("kaminpar", separate_constraints=True))
