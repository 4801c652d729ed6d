"""The dataset registry: every name ``supergcn prepare`` accepts, and where its raw files live.

Real datasets read their original files from a *raw root* laid out as

    <raw_root>/planetoid/{Cora,CiteSeer,PubMed}/raw/ind.*
    <raw_root>/facebook_page_page/raw/facebook_{edges,target}.csv, facebook.json
    <raw_root>/ogb/ogbn_{arxiv,products,papers100M}/...
    <raw_root>/reddit/raw/...
    <raw_root>/proteins/subgraph3_iso_vs_iso_30_70length_ALL.m100.propermm.mtx
    <raw_root>/ogb_lsc/mag240m_kddcup2021/...
    <raw_root>/law/uk-2007-05/uk-2007-05.{graph,properties}
    <raw_root>/igb/{tiny,small,medium,large,full}/processed/...

(the layout of ``../shared/datasets``), downloading into it when files are missing and
the internet is reachable. Synthetic datasets are generated from ``seed``. A graph of your
own is read from its NumPy files under a name of your choosing that is none of these
(:func:`prepare_own_dataset`, ``docs/own-graph.md``).
"""

from __future__ import annotations

import re
from pathlib import Path

from supergcn.data.datasets import synthetic
from supergcn.data.datasets.igb import SIZES as IGB_SIZES
from supergcn.data.datasets.pyg import PLANETOID_NAMES
from supergcn.data.graph import Graph
from supergcn.data.keys import MAX_PAIR_KEYED_NODES
from supergcn.data.own_files import GraphFiles
from supergcn.data.published import PUBLISHED, check_counts, check_files
from supergcn.errors import SuperGCNError

#: The R-MAT family's names (``rmat-<scale>``), as the config schema's dataset pattern spells it.
RMAT_PATTERN = "rmat-[0-9]+"
#: The largest R-MAT scale: 2^31 nodes, the most whose edge keys fit 64 bits
#: (:data:`~supergcn.data.keys.MAX_PAIR_KEYED_NODES`).
MAX_RMAT_SCALE = MAX_PAIR_KEYED_NODES.bit_length() - 1


# Each loader takes (name, its folder under the raw root, seed) and imports its reader when
# called, so that naming the datasets loads neither PyG nor ogb.
def _planetoid(name: str, root: Path, seed: int) -> Graph:
    from supergcn.data.datasets.pyg import load_planetoid
    return load_planetoid(name, root)


def _facebook(name: str, root: Path, seed: int) -> Graph:
    from supergcn.data.datasets.facebook import load_facebook
    return load_facebook(root, seed)


def _reddit(name: str, root: Path, seed: int) -> Graph:
    from supergcn.data.datasets.pyg import load_reddit
    return load_reddit(root)


def _ogb(name: str, root: Path, seed: int) -> Graph:
    from supergcn.data.datasets.ogb import load_ogb
    return load_ogb(name, root)


def _proteins(name: str, root: Path, seed: int) -> Graph:
    from supergcn.data.datasets.proteins import load_proteins
    return load_proteins(root, seed)


def _mag240m(name: str, root: Path, seed: int) -> Graph:
    from supergcn.data.datasets.mag240m import load_mag240m
    return load_mag240m(root)


def _uk_2007_05(name: str, root: Path, seed: int) -> Graph:
    from supergcn.data.datasets.law import load_uk_2007_05
    return load_uk_2007_05(root, seed)


def _igb(name: str, root: Path, seed: int) -> Graph:
    from supergcn.data.datasets.igb import load_igb
    return load_igb(name, root)


#: Every real dataset, in the order ``supergcn prepare --help`` lists them: its folder under
#: the raw root and its loader. The config schema's dataset pattern is held to these names
#: by ``tests/test_naming.py``.
REAL_DATASETS = {
    **{name: ("planetoid", _planetoid) for name in PLANETOID_NAMES},
    "facebook": ("facebook_page_page", _facebook),
    "reddit": ("reddit", _reddit),
    **{name: ("ogb", _ogb) for name in ("ogbn-arxiv", "ogbn-products", "ogbn-papers100M")},
    "proteins": ("proteins", _proteins),
    "ogb-lsc-mag240M": ("ogb_lsc", _mag240m),
    "uk-2007-05": ("law", _uk_2007_05),
    **{name: ("igb", _igb) for name in IGB_SIZES},
}


def dataset_names() -> list[str]:
    """Every name :func:`prepare_dataset` accepts (``rmat-<scale>`` for the R-MAT family).

    Returns:
        The real datasets, then the planted synthetic presets, then ``rmat-<scale>``.
    """
    return [*REAL_DATASETS, *synthetic.PLANTED_PRESETS, "rmat-<scale>"]


def prepare_dataset(name: str, raw_root: str | Path = "data/raw", seed: int = 0,
                    accept_source_changes: bool = False) -> Graph:
    """Build the in-memory :class:`Graph` for ``name`` (see the module docstring), a real
    dataset's raw files and counts checked against what its source published
    (:mod:`supergcn.data.published`; the provenance's ``source_check`` records what was).

    Args:
        name: a name of :func:`dataset_names` (``rmat-<scale>`` with any scale 1..31: its edge keys hold no more nodes).
        raw_root: where real datasets' original files are, or are downloaded to.
        seed: seed of synthetic generators and of random splits.
        accept_source_changes: read raw files or counts that differ from the published
            ones (a deliberate local variant, recorded) instead of refusing them.

    Returns:
        The validated, canonical (undirected, de-duplicated) graph.

    Raises:
        SuperGCNError: an unknown name, raw files that are missing and cannot be fetched,
            or raw files or counts other than the published ones.
    """
    if name in synthetic.PLANTED_PRESETS:
        return synthetic.PLANTED_PRESETS[name].generate(name, seed)
    if re.fullmatch(RMAT_PATTERN, name):
        scale = int(name.removeprefix("rmat-"))
        if not 1 <= scale <= MAX_RMAT_SCALE:
            raise SuperGCNError(f"R-MAT scale {scale} is out of range: 2^{scale} nodes' edge keys overflow 64 bits"
                                if scale > MAX_RMAT_SCALE else f"R-MAT scale {scale} is out of range",
                                f"use rmat-<scale> with 1 <= scale <= {MAX_RMAT_SCALE}")
        return synthetic.rmat_graph(name, scale, synthetic.RMAT_EDGE_FACTOR, synthetic.RMAT_FEATURES,
                                    synthetic.RMAT_CLASSES, (0.6, 0.2, 0.2), seed)
    if name not in REAL_DATASETS:
        raise SuperGCNError(f"unknown dataset {name!r}", f"choose one of {', '.join(dataset_names())}; or give your "
                            "own graph's files and --name instead (docs/own-graph.md)")
    folder, load = REAL_DATASETS[name]
    root = Path(raw_root) / folder
    files = check_files(name, root, accept_source_changes)
    graph = load(name, root, seed)
    files.update(check_files(name, root, accept_source_changes))  # those the loader fetched
    counts = {"nodes": graph.num_nodes, "features": graph.features.shape[1], "classes": graph.num_classes}
    if name in PUBLISHED and PUBLISHED[name].edges is not None:
        counts["edges"] = graph.num_undirected_edges
    checked = check_counts(name, counts, root, accept_source_changes)
    if files or checked:
        changed = (any(not entry["published"] for entry in files.values())
                   or any(entry["found"] != entry["published"] for entry in checked.values()))
        graph.provenance["source_check"] = {"published_by": PUBLISHED[name].source, "files": files,
                                            "counts": checked, "accepted_changes": changed}
    return graph


def is_builtin(name: str) -> bool:
    """Whether ``name`` names a dataset of :func:`dataset_names` (``rmat-<scale>`` any scale).

    Args:
        name: a dataset name.

    Returns:
        True for a real dataset, a synthetic preset or an R-MAT name.
    """
    return name in REAL_DATASETS or name in synthetic.PLANTED_PRESETS or re.fullmatch(RMAT_PATTERN, name) is not None


def prepare_own_dataset(name: str, files: GraphFiles, seed: int = 0) -> Graph:
    """Build the in-memory :class:`Graph` of your own from its NumPy ``files``
    (:func:`~supergcn.data.datasets.own_arrays.load_own_graph`).

    Args:
        name: its name: letters, digits, ``-`` and ``_``, none of :func:`dataset_names`.
        files: its files.
        seed: seed of the random split drawn when ``files`` give none.

    Returns:
        The validated, canonical (undirected, de-duplicated) graph.

    Raises:
        SuperGCNError: ``name`` is a built-in dataset's, or a file is missing or wrong
            (each message names the file and the fix).
    """
    if is_builtin(name):
        raise SuperGCNError(f"--name {name!r} is a built-in dataset's name", "give your own graph another name")
    from supergcn.data.datasets.own_arrays import load_own_graph
    return load_own_graph(name, files, seed)
