"""UK-2007-05 (Boldi et al., the Laboratory for Web Algorithmics) from the LAW's BV files.

``<root>/uk-2007-05/uk-2007-05.{graph,properties}`` (``<raw_root>/law``), as the LAW
distributes them, decoded by :mod:`supergcn.data.datasets.webgraph`. The web graph has no
features or labels; as the paper does (Table 2: 128 features, 172 classes), the pipeline
makes them up, deterministically from ``--seed``: standard normal features, uniform
labels and a random 60/20/20 split, all recorded in the graph manifest. The features are
generated a block of rows at a time into a memory map beside the graph's files
(``uk-2007-05.features-seed<seed>.npy``, 54 GB for the full graph) and reused; the links
are made undirected.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from supergcn.data.datasets.made_up import made_up_features, made_up_labels
from supergcn.data.datasets.webgraph import decode_bvgraph
from supergcn.data.graph import Graph, build_graph, random_split

BASENAME = "uk-2007-05"
FEATURES, CLASSES = 128, 172
SPLIT = (0.6, 0.2, 0.2)
def load_uk_2007_05(root: str | Path, seed: int) -> Graph:
    folder = Path(root) / BASENAME
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
