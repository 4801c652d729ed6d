"""UK-2007-05 (Boldi et al., the Laboratory for Web Algorithmics) from the LAW's BV files.

``<root>/uk-2007-05/uk-2007-05.{graph,properties}`` (``<raw_root>/law``), as the LAW
distributes them, decoded by :mod:`supergcn.data.datasets.webgraph`. The web graph has no
features or labels; as the paper does (Table 2: 128 features, 172 classes), the pipeline
makes them up, deterministically from ``--seed``: standard normal features, uniform
labels and a random 60/20/20 split, all recorded in the graph manifest. The features are
generated a block of rows at a time into a memory map beside the graph's files
(``uk-2007-05.features-seed<seed>.npy``, 54 GB for the full graph) and reused; the links
are made undirected.

Where the graph's files are absent, :func:`fetch_uk_2007_05` downloads them from the LAW
(resumable, the space for them and the made-up features checked first): the LAW's
``uk-2007-05.md5sums`` first, then the ``.properties`` and ``.graph`` files, each checked
against the MD5 listed there, and the properties against the published node and arc
counts. The ``.offsets`` file is not needed: the graph is decoded in one pass.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from supergcn.data.datasets.made_up import made_up_features, made_up_labels
from supergcn.data.datasets.webgraph import decode_bvgraph, read_properties
from supergcn.data.graph import Graph, build_graph, random_split
from supergcn.errors import SuperGCNError

BASENAME = "uk-2007-05"
FEATURES, CLASSES = 128, 172
SPLIT = (0.6, 0.2, 0.2)
#: Where the LAW serves the graph, and its published size (the paper's Table 2).
SOURCE_URL = f"http://data.law.di.unimi.it/webdata/{BASENAME}"
NODES, ARCS = 105_896_555, 3_738_733_648


def fetch_uk_2007_05(folder: Path) -> None:
    """Download the LAW's files of the graph into ``folder`` (see the module docstring)."""
    from supergcn.data.download import FetchFailed, RemoteFile, download, download_all, read_md5sums, refuse_unexpected

    names = [f"{BASENAME}.properties", f"{BASENAME}.graph"]
    try:
        sums_path = download(f"{SOURCE_URL}/{BASENAME}.md5sums", folder / f"{BASENAME}.md5sums")
    except FetchFailed as exc:
        wanted = ", ".join(f"{BASENAME}{suffix}" for suffix in (".md5sums", ".properties", ".graph"))
        cause = str(exc).split(" — ", 1)[0]  # the source's answer, without the single file's fix
        raise SuperGCNError(f"the LAW's listing of {BASENAME}'s checksums could not be fetched ({cause})",
                            f"on a machine with internet fetch {wanted} from {SOURCE_URL}/ into {folder} (then "
                            f"`md5sum -c {BASENAME}.md5sums --ignore-missing` there), and run again") from exc
    sums = read_md5sums(sums_path)
    unlisted = [name for name in names if name not in sums]
    if unlisted:
        raise SuperGCNError(f"{sums_path} lists no MD5 for {', '.join(unlisted)}, so the download cannot be checked",
                            f"delete {sums_path} to fetch it again, or put the checked files there by hand")
    download_all([RemoteFile(f"{SOURCE_URL}/{name}", name, sums[name]) for name in names], folder,
                 extra_bytes=NODES * FEATURES * 4)
    properties = read_properties(folder / names[0])
    counts = (int(properties.get("nodes", -1)), int(properties.get("arcs", -1)))
    if counts != (NODES, ARCS):
        refuse_unexpected([folder / name for name in names], f"the LAW's {names[0]} gives {counts[0]:,} nodes "
                          f"and {counts[1]:,} arcs, not the published {NODES:,} and {ARCS:,}",
                          "check the LAW's page for the graph")


def load_uk_2007_05(root: str | Path, seed: int) -> Graph:
    folder = Path(root) / BASENAME
    if not all((folder / f"{BASENAME}{suffix}").is_file() for suffix in (".properties", ".graph")):
        fetch_uk_2007_05(folder)
    indptr, successors = decode_bvgraph(folder / BASENAME)
    num_nodes = len(indptr) - 1
    sources = np.repeat(np.arange(num_nodes, dtype=successors.dtype), np.diff(indptr))
    labels = made_up_labels(num_nodes, CLASSES, seed)
    masks = random_split(num_nodes, SPLIT, seed)
    features = made_up_features(folder / f"{BASENAME}.features-seed{seed}.npy", num_nodes, FEATURES, seed)
    return build_graph(BASENAME, sources, successors, features, labels, *masks,
                       provenance={"source": "LAW uk-2007-05 BV graph", "root": str(Path(root).resolve()),
                                   "made_undirected": True, "seed": seed,
                                   "made_up": f"{FEATURES} standard normal features (row block b from (seed, b)), "
                                              f"{CLASSES} uniform labels, seeded random 60/20/20 split, as the "
                                              "paper adds them to this unlabelled web graph"})
