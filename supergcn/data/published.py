"""What the sources of the built-in datasets published, and the check of what is read against it.

A raw file placed by hand (Facebook's, and every dataset whose host needs a login or a
licence click) is compared with nothing but itself unless something records what it should
be: a file cut short by a copy, a CSV with a line dropped or a features file of another
release would otherwise be prepared without a word as a smaller or another graph, under the
same name. So, for every built-in dataset with published figures (:data:`PUBLISHED`):

* each raw file whose published bytes are fixed is checked, before it is read, against the
  SHA-256 recorded for it here (the files of PyG's Planetoid and of the MUSAE archive, as
  ``../shared/datasets/SHA256SUMS`` lists them);
* the graph read is checked against the published node, edge, feature and class counts
  (edges where the source counts what the canonical graph keeps: undirected edges, each
  self loop once, before ``--self-loops drop``).

A mismatch is refused in one line naming the file or the count, what was published and
what was found, and the fix: fetch the file again, or, for a deliberate local variant,
``--accept-source-changes``, which the graph's manifest then records. Either way the
manifest records what was checked (``source_check``). Downloads are checked as they arrive
as well (:mod:`supergcn.data.download`); a graph of your own has its files' digests
recorded (:mod:`supergcn.data.datasets.own_arrays`).

Standard library only.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from supergcn.errors import SuperGCNError


@dataclass(frozen=True)
class Published:
    """A source's published figures of one dataset.

    Args:
        source: who published them, and where.
        fetch: how the files are fetched again (for the refusal's fix).
        files: raw file (relative to the dataset's folder under the raw root) -> SHA-256 of
            the published bytes.
        nodes: nodes.
        edges: undirected edges, each self loop once, where the source counts those.
        features: features per node.
        classes: classes.
        placed: the folder under the raw root that holds files a user places by hand (no
            download fetches them), or None.
    """

    source: str
    fetch: str
    files: dict = field(default_factory=dict)
    nodes: int | None = None
    edges: int | None = None
    features: int | None = None
    classes: int | None = None
    placed: str | None = None


_PLANETOID = "PyG's Planetoid (Yang et al. 2016)"
_PLANETOID_FETCH = "delete the folder and let PyG fetch it, or copy the raw files from PyG's planetoid repository"
_OGB = "OGB (Hu et al. 2020)"
_OGB_FETCH = "delete the dataset's folder under <raw_root>/ogb and let ogb fetch it again"

#: Every built-in dataset with published figures (datasets of their own, and synthetic ones,
#: have none; the loaders of the paper's largest graphs check their own: law, proteins,
#: mag240m, igb).
PUBLISHED = {
    "cora": Published(_PLANETOID, _PLANETOID_FETCH, files={
        "Cora/raw/ind.cora.x": "23cfa55d91c6f624233f5eb7b6e3f141f1bd2b2ae39608a63cf5d084bb27baab",
        "Cora/raw/ind.cora.y": "94465c14eb53e04ca262198dcbb2521ee8af60fb3f3d546cd6ca24a511b0e7d1",
        "Cora/raw/ind.cora.tx": "b9afbaa4a400df991f6f02ef677e1e44da55ffc04801fd02f9e673987829226a",
        "Cora/raw/ind.cora.ty": "41f5ac76596a1699cc33f53084a2419e92961c42bb75f36fc38e616d348532ad",
        "Cora/raw/ind.cora.allx": "9419ba2f26f5c35243db64aba110e0f35a04851609e0dc5433450676ca6b8543",
        "Cora/raw/ind.cora.ally": "2b998f5cc7fedc86e7f97ca2498f47a1ffc1462c29e2d578b23bf3f62b6e7d71",
        "Cora/raw/ind.cora.graph": "58f13302f39dde8852dad6fe6d15b89b077b6d7f837626bce671ef80344b383d",
        "Cora/raw/ind.cora.test.index": "297ce89af2b51a6a194181c7dbe1796c6a1cf9cd9349a88383b1b1e227867875"},
        nodes=2708, edges=5278, features=1433, classes=7),
    "citeseer": Published(_PLANETOID, _PLANETOID_FETCH, files={
        "CiteSeer/raw/ind.citeseer.x": "d20de19150741e555de0ed037195630fc194114ebc7fd72ced62810148aa22f6",
        "CiteSeer/raw/ind.citeseer.y": "8ba87e515d8e3ee3cf52f6d2c5b86aa73f11ecad825a808455209ec26cd54924",
        "CiteSeer/raw/ind.citeseer.tx": "539a8906a2da97628d212f2fdd668c109a8b3f0d36574b59e5d3fd5b5303da21",
        "CiteSeer/raw/ind.citeseer.ty": "55e5bd1ba1e733a04598753ad1a8d57957f4b8f89e74519f41f4f4938767e4ce",
        "CiteSeer/raw/ind.citeseer.allx": "2ac30345d95c9ec933a817ee0bdd6a5f077f8c184a20e696910192d534414668",
        "CiteSeer/raw/ind.citeseer.ally": "f704b2d986dde6c2669934de1f3ae5696a6cf9455c0f6b2646a2d135ea0a1c95",
        "CiteSeer/raw/ind.citeseer.graph": "d79a4ef9d3e7169aee8946145f6b7306e35bc79bffad26346cfb94e10e9912a7",
        "CiteSeer/raw/ind.citeseer.test.index": "2af990671580b6b2df5d158d1038f8292e30c9cd821b5453f399659b25b723d4"},
        nodes=3327, edges=4552, features=3703, classes=6),
    # PubMed's files are as fixed as Cora's, but none was at hand to record: its counts only.
    "pubmed": Published(_PLANETOID, _PLANETOID_FETCH, nodes=19717, edges=44324, features=500, classes=3),
    "facebook": Published(
        "MUSAE's facebook_large archive (Rozemberczki et al. 2019, on SNAP)",
        "download https://snap.stanford.edu/data/facebook_large.zip again and put its files in place", files={
            "raw/facebook_edges.csv": "7c50d8f02a75cc0829577814a1fc14535164daa38d79c3612340c9e9cdbd4022",
            "raw/facebook_target.csv": "7bd96eafea3c2ca40f44bfa9e73642194696c21e38c7b29ed409c32ad14075cd",
            "raw/facebook.json": "ea870537646a93642a0008d38aa9bfeff02018070ba97b1f3f469d9622626436"},
        nodes=22470, edges=171002, features=4714, classes=4, placed="facebook_page_page/raw"),
    "reddit": Published("PyG's Reddit (Hamilton et al. 2017)", "delete <raw_root>/reddit and let PyG fetch it again",
                        nodes=232965, features=602, classes=41),
    "ogbn-arxiv": Published(_OGB, _OGB_FETCH, nodes=169343, features=128, classes=40),
    "ogbn-products": Published(_OGB, _OGB_FETCH, nodes=2449029, edges=61859140, features=100, classes=47),
    "ogbn-papers100M": Published(_OGB, _OGB_FETCH, nodes=111059956, features=128, classes=172),
}
#: The counts a graph is held to, and how the refusal names each.
COUNTS = {"nodes": "nodes", "edges": "undirected edges", "features": "features", "classes": "classes"}
_ACCEPT = "or, for a deliberate local variant, pass --accept-source-changes (the graph's manifest records it)"


def sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, read a block at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 24):
            digest.update(block)
    return digest.hexdigest()


def check_files(name: str, folder: Path, accept_changes: bool = False) -> dict:
    """The published raw files of dataset ``name`` that are present under ``folder``, each
    against its recorded digest (before anything reads them).

    Args:
        name: a built-in dataset.
        folder: its folder under the raw root.
        accept_changes: record a mismatch instead of refusing it.

    Returns:
        File -> ``{"sha256": found, "published": bool}``, for the manifest.

    Raises:
        SuperGCNError: a file that is not the published one (unless ``accept_changes``).
    """
    published = PUBLISHED.get(name)
    checked = {}
    for relative, expected in ({} if published is None else published.files).items():
        path = folder / relative
        if not path.is_file():
            continue  # fetched, or refused as missing, by the loader; checked after it
        found = sha256(path)
        checked[relative] = {"sha256": found, "published": found == expected}
        if found != expected and not accept_changes:
            raise SuperGCNError(f"{path} is not the file {published.source} published: its SHA-256 is "
                                f"{found[:16]}…, the published file's {expected[:16]}… ({path.stat().st_size:,} bytes: "
                                "cut short, edited, or of another release)", f"{published.fetch}, {_ACCEPT}")
    return checked


def check_counts(name: str, found: dict, folder: Path, accept_changes: bool = False) -> dict:
    """A loaded graph's counts against those the source of dataset ``name`` published.

    Args:
        name: a built-in dataset.
        found: :data:`COUNTS`' keys -> the loaded graph's counts.
        folder: its folder under the raw root (named in the refusal).
        accept_changes: record a mismatch instead of refusing it.

    Returns:
        Count -> ``{"found": n, "published": n}`` for each count published, for the manifest.

    Raises:
        SuperGCNError: a count that differs from the published one (unless ``accept_changes``).
    """
    published = PUBLISHED.get(name)
    if published is None:
        return {}
    checked = {key: {"found": int(found[key]), "published": getattr(published, key)} for key in COUNTS
               if getattr(published, key) is not None}
    wrong = [f"{entry['found']:,} {COUNTS[key]}, not the published {entry['published']:,}"
             for key, entry in checked.items() if entry["found"] != entry["published"]]
    if wrong and not accept_changes:
        raise SuperGCNError(f"{name} read from {folder} has {'; '.join(wrong)} ({published.source}): a raw file "
                            "is cut short, lost lines, or belongs to another graph or release",
                            f"{published.fetch}, {_ACCEPT}")
    return checked
