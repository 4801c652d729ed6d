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

from supergcn.data.datasets.webgraph import decode_bvgraph
from supergcn.data.graph import Graph, build_graph, random_split
from supergcn.data.storage import atomic_file, release_pages

BASENAME = "uk-2007-05"
FEATURES, CLASSES = 128, 172
SPLIT = (0.6, 0.2, 0.2)
#: Rows generated per block of the made-up features.
BLOCK_ROWS = 1 << 18


def made_up_features(path: Path, num_nodes: int, seed: int) -> np.ndarray:
    """Standard normal float32 features, row block b drawn from ``(seed, b)``, written once
    to ``path`` and memory-mapped from there (reused when its shape matches)."""
    if path.is_file():
        features = np.load(path, mmap_mode="r", allow_pickle=False)
        if features.shape == (num_nodes, FEATURES) and features.dtype == np.float32:
            return features
    with atomic_file(path) as tmp:
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(num_nodes, FEATURES))
        for block, start in enumerate(range(0, num_nodes, BLOCK_ROWS)):
            rows = out[start:start + BLOCK_ROWS]
            np.random.default_rng([seed, block]).standard_normal(rows.shape, dtype=np.float32, out=rows)
            out.flush()
            release_pages(out)
        del out
    return np.load(path, mmap_mode="r", allow_pickle=False)


def load_uk_2007_05(root: str | Path, seed: int) -> Graph:
    folder = Path(root) / BASENAME
    indptr, successors = decode_bvgraph(folder / BASENAME)
    num_nodes = len(indptr) - 1
    sources = np.repeat(np.arange(num_nodes, dtype=successors.dtype), np.diff(indptr))
    labels = np.random.default_rng([seed, num_nodes]).integers(0, CLASSES, num_nodes)
    masks = random_split(num_nodes, SPLIT, seed)
    features = made_up_features(folder / f"{BASENAME}.features-seed{seed}.npy", num_nodes, seed)
    return build_graph(BASENAME, sources, successors, features, labels, *masks,
                       provenance={"source": "LAW uk-2007-05 BV graph", "root": str(Path(root).resolve()),
                                   "made_undirected": True, "seed": seed,
                                   "made_up": f"{FEATURES} standard normal features (row block b from (seed, b)), "
                                              f"{CLASSES} uniform labels, seeded random 60/20/20 split, as the "
                                              "paper adds them to this unlabelled web graph"})
