"""Proteins (HipMCL's isolate protein-similarity network, Azad et al.) from its Matrix Market file.

The file DGL's DistGNN example fetches, ``subgraph3_iso_vs_iso_30_70length_ALL.m100.propermm.mtx``
(under ``<raw_root>/proteins``): a square coordinate matrix (``pattern`` or with values,
``general`` or ``symmetric``), 1-based, one entry per line after the size line. The
entries are parsed a block of lines at a time by pandas' C reader into preallocated
arrays (the header gives their number), never as a whole matrix.

The network has no features or labels. As the paper's Table 2 (128 features, 256 classes)
and DistGNN's conversion of it, the pipeline makes them up from ``--seed``
(:mod:`supergcn.data.datasets.made_up`) and takes DistGNN's split: the first 1,000,000
nodes for training, the next 500,000 for testing, the next 5,000 for validation, in id
order (scaled down in proportion for a graph of fewer nodes); the edges are undirected.

Where the file is absent, :func:`fetch_proteins` downloads it from NERSC's portal, where
DGL's DistGNN tools fetch it (resumable, the space for it and the made-up features
checked first). Its source publishes no size or checksum: what is checked is that the
file is whole (every entry its size line announces, parsed) and that its size line gives
the published 8,745,542 proteins; the MD5 of what arrived is written beside it
(``<file>.md5``) and recorded in the graph's manifest.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from supergcn.data.datasets.made_up import made_up_features, made_up_labels
from supergcn.data.graph import Graph, build_graph
from supergcn.data.storage import reading_raw
from supergcn.errors import SuperGCNError
from supergcn.progress import progress

FILE = "subgraph3_iso_vs_iso_30_70length_ALL.m100.propermm.mtx"
FEATURES, CLASSES = 128, 256
#: Proteins in the published network (the paper's Table 2).
PUBLISHED_NODES = 8_745_542
#: DistGNN's split of those proteins, in id order: train, test, validation.
DISTGNN_NODES, DISTGNN_SPLIT = PUBLISHED_NODES, (1_000_000, 500_000, 5_000)
BLOCK_LINES = 1 << 22
#: Where DGL's DistGNN tools (``dgl/distgnn/tools/tools.py``) fetch the file.
SOURCE_URL = f"https://portal.nersc.gov/project/m1982/GNN/{FILE}"


def read_coordinate_header(handle) -> tuple[int, int, int, bool]:
    """(rows, columns, entries, symmetric) of a Matrix Market coordinate file, ``handle``
    left at its first entry."""
    banner = handle.readline().split()
    if len(banner) < 5 or banner[0] != "%%MatrixMarket" or banner[1:3] != ["matrix", "coordinate"]:
        raise SuperGCNError(f"{handle.name} is not a Matrix Market coordinate matrix (its first line is "
                            f"{' '.join(banner)!r})", "download the file again")
    line = handle.readline()
    while line.startswith("%"):
        line = handle.readline()
    try:
        rows, columns, entries = (int(value) for value in line.split())
    except ValueError as exc:
        raise SuperGCNError(f"{handle.name}'s size line {line.strip()!r} is not three integers",
                            "the file is damaged: download it again") from exc
    return rows, columns, entries, banner[4].lower() == "symmetric"


def read_coordinate_edges(path: Path) -> tuple[int, np.ndarray, np.ndarray]:
    """(nodes, sources, destinations), 0-based, of a square Matrix Market coordinate file."""
    import pandas as pd

    with open(path) as handle:
        rows, columns, entries, _ = read_coordinate_header(handle)
        if rows != columns:
            raise SuperGCNError(f"{path} is a {rows} x {columns} matrix, not a graph's square adjacency",
                                "download the file again")
        dtype = np.int32 if rows < 2**31 else np.int64
        sources, destinations = np.empty(entries, dtype=dtype), np.empty(entries, dtype=dtype)
        filled, surplus = 0, False
        with progress(f"prepare: reading {path.name}", total=entries, unit="edge", scale=True) as bar:
            for block in pd.read_csv(handle, sep=r"\s+", header=None, usecols=[0, 1], dtype=np.int64,
                                     chunksize=BLOCK_LINES, comment="%"):
                values = block.to_numpy()
                if filled + len(values) > entries:
                    surplus = True
                    break
                sources[filled:filled + len(values)] = values[:, 0] - 1
                destinations[filled:filled + len(values)] = values[:, 1] - 1
                filled += len(values)
                bar.update(len(values))
    if surplus or filled != entries:
        raise SuperGCNError(f"{path} holds {'more' if surplus else f'{filled:,}'} entries, not the {entries:,} its "
                            "size line announces", "the file is truncated or damaged: download it again")
    return rows, sources, destinations


def distgnn_split(num_nodes: int) -> list[np.ndarray]:
    """DistGNN's train / validation / test masks, in id order, scaled to ``num_nodes``."""
    train, test, val = (round(count * num_nodes / DISTGNN_NODES) for count in DISTGNN_SPLIT)
    masks = [np.zeros(num_nodes, dtype=bool) for _ in range(3)]
    masks[0][:train] = True
    masks[2][train:train + test] = True
    masks[1][train + test:train + test + val] = True
    return masks


def fetch_proteins(root: Path) -> None:
    """Download the matrix into ``root`` (see the module docstring)."""
    from supergcn.data.download import download, refuse_unexpected

    path = download(SOURCE_URL, root / FILE, extra_bytes=PUBLISHED_NODES * FEATURES * 4)
    with open(path) as handle:
        rows = read_coordinate_header(handle)[0]
    if rows != PUBLISHED_NODES:
        refuse_unexpected([path], f"{SOURCE_URL} arrived as a matrix of {rows:,} rows, not the published "
                          f"{PUBLISHED_NODES:,} proteins", "check it")


def load_proteins(root: str | Path, seed: int) -> Graph:
    path = Path(root) / FILE
    if not path.is_file():
        fetch_proteins(Path(root))
    checksum = path.with_name(path.name + ".md5")
    with reading_raw("proteins", Path(root)):
        num_nodes, sources, destinations = read_coordinate_edges(path)
    labels = made_up_labels(num_nodes, CLASSES, seed)
    features = made_up_features(Path(root) / f"proteins.features-seed{seed}.npy", num_nodes, FEATURES, seed)
    return build_graph("proteins", sources, destinations, features, labels, *distgnn_split(num_nodes),
                       provenance={"source": f"HipMCL isolate network, {FILE}", "root": str(Path(root).resolve()),
                                   "made_undirected": True, "seed": seed,
                                   "md5": checksum.read_text().split()[0] if checksum.is_file() else None,
                                   "made_up": f"{FEATURES} standard normal features (row block b from (seed, b)), "
                                              f"{CLASSES} uniform labels, as the paper adds them",
                                   "split": "DistGNN's: the first 1,000,000 nodes train, the next 500,000 test, "
                                            "the next 5,000 validation (scaled to the graph's nodes)"})
