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
    libmetis.load_metis.cache_clear()
    try:
        libmetis.load_metis()
    except SuperGCNError as exc:
        pytest.skip(f"no METIS library here ({exc}); Debian: apt-get install libmetis5")
    yield
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
    combined = partition_graph(g, 4, constraints)
    weights = {"nodes": None, "in_degree": g.in_degree, "train": g.train_mask.astype(float)}
    for name, weight in weights.items():
        assert imbalance(separate.parts, weight, 4) <= 1.05, name
    assert imbalance(separate.parts, weights["train"], 4) < imbalance(combined.parts, weights["train"], 4)
    assert np.array_equal(separate.parts, partition_graph(g, 4, constraints, separate_constraints=True).parts)


def test_the_manifest_says_which_metis_ran(metis_library, tmp_path):
    manifest = run_partition(grid_graph(), "h", 3, tmp_path / "p", engine=Engine(separate_constraints=True))
    assert manifest["engine"]["method"] == "METIS library k-way, one constraint per weight"


def test_a_missing_library_is_named_with_the_fix(monkeypatch, tmp_path):
    libmetis.load_metis.cache_clear()
    monkeypatch.delenv(libmetis.LIBRARY_VARIABLE, raising=False)
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    with pytest.raises(SuperGCNError, match="not found") as raised:
        partition_graph(grid_graph(), 2, separate_constraints=True)
    assert "apt-get install libmetis5" in str(raised.value)
    libmetis.load_metis.cache_clear()
    monkeypatch.setenv(libmetis.LIBRARY_VARIABLE, str(tmp_path / "nothing.so"))
    with pytest.raises(SuperGCNError, match="not a usable METIS library"):
        partition_graph(grid_graph(), 2, separate_constraints=True)
    libmetis.load_metis.cache_clear()


def test_kaminpar_cannot_keep_constraints_separate(tmp_path):
    with pytest.raises(SuperGCNError, match="KaMinPar balances one weight"):
        run_partition(grid_graph(), "h", 2, tmp_path / "p", engine=Engine("kaminpar", separate_constraints=True))
