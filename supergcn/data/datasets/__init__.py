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
the internet is reachable. Synthetic datasets are generated from ``seed``.
"""

from __future__ import annotations

import re
from pathlib import Path

from supergcn.data.datasets import synthetic
from supergcn.data.graph import Graph
from supergcn.errors import SuperGCNError

_RMAT = re.compile(r"^rmat-(\d+)$")
REAL_DATASETS = ("cora", "citeseer", "pubmed", "facebook", "reddit", "ogbn-arxiv", "ogbn-products", "ogbn-papers100M",
                 "proteins", "ogb-lsc-mag240M", "uk-2007-05",
                 "igb-tiny", "igb-small", "igb-medium", "igb-large", "igb260m")


def dataset_names() -> list[str]:
    """Every name :func:`prepare_dataset` accepts (``rmat-<scale>`` for the R-MAT family).

    Returns:
        The real datasets, then the planted synthetic presets, then ``rmat-<scale>``.
    """
    return [*REAL_DATASETS, *synthetic.PLANTED_PRESETS, "rmat-<scale>"]


def prepare_dataset(name: str, raw_root: str | Path = "data/raw", seed: int = 0) -> Graph:
    """Build the in-memory :class:`Graph` for ``name`` (see the module docstring).

    Args:
        name: a name of :func:`dataset_names` (``rmat-<scale>`` with any scale 1..34).
        raw_root: where real datasets' original files are, or are downloaded to.
        seed: seed of synthetic generators and of random splits.

    Returns:
        The validated, canonical (undirected, de-duplicated) graph.

    Raises:
        SuperGCNError: an unknown name, or raw files that are missing and cannot be fetched.
    """
    raw_root = Path(raw_root)
    if name in synthetic.PLANTED_PRESETS:
        return synthetic.PLANTED_PRESETS[name].generate(name, seed)
    match = _RMAT.match(name)
    if match:
        scale = int(match.group(1))
        if not 1 <= scale <= 34:
            raise SuperGCNError(f"R-MAT scale {scale} is out of range", "use rmat-<scale> with 1 <= scale <= 34")
        return synthetic.rmat_graph(name, scale, synthetic.RMAT_EDGE_FACTOR, synthetic.RMAT_FEATURES,
                                    synthetic.RMAT_CLASSES, (0.6, 0.2, 0.2), seed)
    if name in ("cora", "citeseer", "pubmed"):
        from supergcn.data.datasets.pyg import load_planetoid
        return load_planetoid(name, raw_root / "planetoid")
    if name == "facebook":
        from supergcn.data.datasets.facebook import load_facebook
        return load_facebook(raw_root / "facebook_page_page", seed)
    if name == "reddit":
        from supergcn.data.datasets.pyg import load_reddit
        return load_reddit(raw_root / "reddit")
    if name == "proteins":
        from supergcn.data.datasets.proteins import load_proteins
        return load_proteins(raw_root / "proteins", seed)
    if name == "uk-2007-05":
        from supergcn.data.datasets.law import load_uk_2007_05
        return load_uk_2007_05(raw_root / "law", seed)
    if name == "ogb-lsc-mag240M":
        from supergcn.data.datasets.mag240m import load_mag240m
        return load_mag240m(raw_root / "ogb_lsc")
    if name.startswith("igb") and name in REAL_DATASETS:
        from supergcn.data.datasets.igb import load_igb
        return load_igb(name, raw_root / "igb")
    if name.startswith("ogbn-") and name in REAL_DATASETS:
        from supergcn.data.datasets.ogb import load_ogb
        return load_ogb(name, raw_root / "ogb")
    raise SuperGCNError(f"unknown dataset {name!r}", f"choose one of {', '.join(dataset_names())}")
