"""IGB260M and its smaller homogeneous sizes (Khatua et al., KDD 2023) from IGB's own files.

IGB's homogeneous graph is the paper-citation graph of its heterogeneous one. Its files,
as IGB's download scripts lay them out under ``<root>`` (``<raw_root>/igb``):

    <size>/processed/paper/node_feat.npy                 N x 1024 float32
    <size>/processed/paper/node_label_19.npy             N labels (stored as float)
    <size>/processed/paper__cites__paper/edge_index.npy  E x 2 (citing, cited)

``tiny``, ``small`` and ``medium`` are ``.npy`` files. Of ``large`` and ``full`` (IGB260M)
IGB serves the features and labels as raw arrays without a ``.npy`` header (some copies
have one), whose shapes IGB's loader takes from the sizes below (:data:`RAW_NODES`), and
the edges as a ``.npy`` file; each file is read as its first bytes say.

What the pipeline adds, as IGB's own loader does it: the split, the first 60 % of the
labelled nodes in id order for training, the next 20 % for validation and the rest of the
labelled ones for testing (in ``full`` only the first :data:`LABELLED_FULL` nodes carry
one of the 19 labels); the citations made undirected (the canonical graph is); IGB
removes and adds self loops, which ``supergcn prepare --self-loops`` chooses here.

:func:`fetch_igb` downloads what is missing (resumable, the disk space checked first):
the archive of a small size, checked against IGB's MD5, where none of its files are
there; the files of ``large`` and ``full``, checked against the sizes and MD5s recorded in
:data:`FILE_RECORDS`.

Nothing is read whole: features and edges are memory-mapped; the features are float32
already, so they are written straight from the source file; the edges are read in
blocks by :func:`~supergcn.data.csr.symmetric_csr`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from supergcn.data.graph import Graph, build_graph
from supergcn.data.storage import reading_raw
from supergcn.errors import SuperGCNError

#: Dataset names and IGB's size names.
SIZES = {"igb-tiny": "tiny", "igb-small": "small", "igb-medium": "medium", "igb-large": "large",
         "igb260m": "full"}
#: Sizes whose files are raw arrays, and their node counts (IGB's loader).
RAW_NODES = {"large": 100_000_000, "full": 269_346_174}
#: Nodes of ``full`` that carry one of the 19 labels (the first ones; IGB's loader).
LABELLED_FULL = 227_130_858
FEATURES = 1024
SPLIT = (0.6, 0.2)


#: IGB's archives of the sizes it serves as one file (IGB-Datasets' ``igb/download.py``:
#: address and MD5), and their node counts, which bound what unpacking them takes.
ARCHIVES = {
    "tiny": ("https://igb-public-awsopen.s3.amazonaws.com/igb-homogeneous/igb_homogeneous_tiny.tar.gz",
             "34856534da55419b316d620e2d5b21be", 100_000),
    "small": ("https://igb-public-awsopen.s3.amazonaws.com/igb-homogeneous/igb_homogeneous_small.tar.gz",
              "6781c699723529902ace0a95cafe6fe4", 1_000_000),
    "medium": ("https://igb-public-awsopen.s3.amazonaws.com/igb-homogeneous/igb_homogeneous_medium.tar.gz",
               "4640df4ceee46851fd18c0a44ddcc622", 10_000_000),
}
#: Where IGB's scripts (``download_igb_large.sh``, ``download_igb260m.sh``) fetch the files of
#: the sizes served file by file.
FILE_ROOTS = {"large": "https://igb-public-awsopen.s3.amazonaws.com/igb_large/processed",
              "full": "https://igb-public-awsopen.s3.amazonaws.com/IGBH/processed"}
#: What is recorded about those files. IGB publishes no checksums for them; those of
#: ``full`` are MLCommons' (the MLPerf inference IGBH download and cm4mlops'
#: get-dataset-mlperf-inference-igbh). The sizes of ``large``'s headerless arrays follow
#: from its node count; ``full``'s files are read as IGB's loader reads them, with or
#: without a header, so no size is recorded for them, nor for any edge file (the count of
#: ``full``'s is disputed: 3,995,777,033 in the paper, 3,727,095,830 in the file users report).
FILE_RECORDS = {
    "large": {"paper/node_feat.npy": (None, RAW_NODES["large"] * FEATURES * 4),
              "paper/node_label_19.npy": (None, RAW_NODES["large"] * 4),
              "paper__cites__paper/edge_index.npy": (None, None)},
    "full": {"paper/node_feat.npy": ("71058b9ac8011bafa1c5467504452d13", None),
             "paper/node_label_19.npy": ("be6fda45566e679bdb05ebea98ad16d4", None),
             "paper__cites__paper/edge_index.npy": ("f4897f53636c04a9c66f6063ec635c16", None)},
}
NUMPY_MAGIC = b"\x93NUMPY"


def fetch_igb(root: Path, size: str) -> None:
    """Download and check IGB's files of ``size`` below ``root``: the archive of a small
    size, unpacked (and removed), or the missing files of ``large`` and ``full``."""
    from supergcn.data.download import RemoteFile, download, download_all, unpack

    if size in FILE_RECORDS:
        download_all([RemoteFile(f"{FILE_ROOTS[size]}/{path}", f"{size}/processed/{path}", md5, recorded)
                      for path, (md5, recorded) in FILE_RECORDS[size].items()], root)
        return
    url, md5, nodes = ARCHIVES[size]
    # Unpacked, the features alone take N x 1024 x 4 bytes.
    archive = download(url, root / url.rsplit("/", 1)[1], md5, extra_bytes=nodes * FEATURES * 4)
    unpack(archive, root, size)


def igb_files(root: str | Path, size: str) -> dict[str, Path]:
    processed = Path(root) / size / "processed"
    return {"features": processed / "paper" / "node_feat.npy", "labels": processed / "paper" / "node_label_19.npy",
            "edges": processed / "paper__cites__paper" / "edge_index.npy"}


def _open(path: Path, size: str, dtype, row_items: int) -> np.ndarray:
    """A memory map of ``path``: a ``.npy`` file, or for raw sizes (IGB's loader reads
    ``large`` and ``full`` either way) a headerless array of ``dtype``, ``row_items`` to a
    row (a vector where 1); a raw file of part of a row more is refused, not cut short."""
    with open(path, "rb") as handle:
        has_header = handle.read(len(NUMPY_MAGIC)) == NUMPY_MAGIC
    if has_header or size not in RAW_NODES:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    row_bytes = np.dtype(dtype).itemsize * row_items
    rows, remainder = divmod(path.stat().st_size, row_bytes)
    if remainder:
        raise SuperGCNError(f"{path} holds {path.stat().st_size:,} bytes, not a whole number of rows of {row_items} "
                            f"{np.dtype(dtype)}", "the file is truncated or damaged: download it again")
    return np.memmap(path, dtype=dtype, mode="r", shape=(rows, row_items) if row_items > 1 else (rows,))


def load_igb(name: str, root: str | Path) -> Graph:
    """The homogeneous IGB graph of size ``SIZES[name]`` from its files under ``root``."""
    size = SIZES[name]
    files = igb_files(root, size)
    if size in FILE_RECORDS or not any(path.exists() for path in files.values()):
        fetch_igb(Path(root), size)
    missing = [str(path) for path in files.values() if not path.is_file()]
    if missing:
        raise SuperGCNError(f"IGB {size} files not found: {', '.join(missing)}",
                            f"download IGB's homogeneous {size} dataset (IGB-Datasets' download scripts) and "
                            f"extract it so that {Path(root) / size / 'processed'} holds paper/ and "
                            "paper__cites__paper/ (or pass --raw-root)")
    num_nodes = RAW_NODES.get(size)
    with reading_raw(name, Path(root) / size):
        features = _open(files["features"], size, np.float32, FEATURES)
        labels = _open(files["labels"], size, np.float32, 1)
        edges = _open(files["edges"], size, np.int64, 2)
    num_nodes = features.shape[0] if num_nodes is None else num_nodes
    problems = []
    if features.ndim != 2 or features.shape != (num_nodes, FEATURES) or features.dtype != np.float32:
        problems.append(f"node_feat.npy is {features.dtype}{list(features.shape)}, "
                        f"not float32[{num_nodes}, {FEATURES}]")
    if labels.shape != (num_nodes,):
        problems.append(f"node_label_19.npy holds {labels.size:,} labels for {num_nodes:,} nodes")
    if edges.ndim != 2 or edges.shape[1] != 2 or edges.dtype.kind not in "iu":
        problems.append(f"edge_index.npy is {edges.dtype}{list(edges.shape)}, not integer pairs")
    if problems:
        raise SuperGCNError(f"the IGB {size} files under {Path(root) / size} disagree: " + "; ".join(problems),
                            "they are truncated or from different sizes: download and extract them again")
    labelled = LABELLED_FULL if size == "full" else num_nodes
    values = np.asarray(labels[:labelled], dtype=np.float64)
    if not np.all(np.isfinite(values) & (values >= 0) & (values == np.round(values))):
        raise SuperGCNError(f"node_label_19.npy of IGB {size} holds labels that are not class numbers "
                            "among its labelled nodes", "the file is damaged: download it again")
    label_ids = np.full(num_nodes, -1, dtype=np.int64)
    label_ids[:labelled] = values.astype(np.int64)
    n_train, n_val = int(labelled * SPLIT[0]), int(labelled * SPLIT[1])
    masks = [np.zeros(num_nodes, dtype=bool) for _ in range(3)]
    masks[0][:n_train] = True
    masks[1][n_train:n_train + n_val] = True
    masks[2][n_train + n_val:labelled] = True
    return build_graph(name, edges[:, 0], edges[:, 1], features, label_ids, *masks,
                       provenance={"source": f"IGB homogeneous {size} (paper__cites__paper)",
                                   "root": str(Path(root).resolve()), "made_undirected": True,
                                   "split": f"IGB's: labelled nodes in id order, {SPLIT[0]:.0%} train, "
                                            f"{SPLIT[1]:.0%} validation, the rest test",
                                   "labelled_nodes": labelled})
