"""ogb-lsc-mag240M's paper-citation graph (Hu et al., OGB-LSC 2021) from OGB-LSC's own files.

The paper takes the undirected homogeneous citation graph of MAG240M's papers and reports
validation accuracy, the test labels being hidden. OGB-LSC's archive unpacks to
``<root>/mag240m_kddcup2021`` (``<raw_root>/ogb_lsc``):

    meta.pt                                  {"paper": N, ..., "num_classes": 153}
    split_dict.pt                            {"train", "valid", "test": paper ids}
    processed/paper/node_feat.npy            N x 768 float16
    processed/paper/node_label.npy           N labels as float, NaN where hidden or absent
    processed/paper___cites___paper/edge_index.npy   2 x E (citing, cited)

What the pipeline adds: the citations made undirected; the training and validation
splits as published and no test split (its labels are hidden: the test accuracy of a run
is "n/a"); and the features widened to float32, which the model trains in: written once,
a block of rows at a time, beside the original (``node_feat.float32.npy``, 374 GB for the
full graph) and memory-mapped from there, so they are never whole in memory. The
``.pt`` files are read without unpickling code (numpy arrays and ints only).

Where the folder is absent, :func:`fetch_mag240m` downloads OGB-LSC's archive (resumable,
checked against the MD5 OGB's maintainers published, the space for the archive, its
contents and the widened features checked first) and unpacks it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from supergcn.data.graph import Graph, build_graph
from supergcn.data.storage import reading_raw, release_pages
from supergcn.data.written_once import array_written_once
from supergcn.errors import SuperGCNError

FOLDER = "mag240m_kddcup2021"
FEATURES = 768
#: Rows widened per block (about 200 MB of float32).
WIDEN_ROWS = 65_536
#: OGB-LSC's archive: the address ``ogb.lsc.MAG240MDataset`` fetches, the MD5 OGB's
#: maintainers published for it (snap-stanford/ogb issue 127; a comment in
#: ``ogb/lsc/mag240m.py``), and what it unpacks to ("around 202GB", OGB-LSC's documentation).
ARCHIVE_URL = "https://dgl-data.s3-accelerate.amazonaws.com/dataset/OGB-LSC/mag240m_kddcup2021.zip"
ARCHIVE_MD5 = "bd61c9446f557fbe4430d9a7ce108b34"
UNPACKED_BYTES = 202 * 10**9
#: Papers of the full graph (meta.pt), which size the widened features.
PAPERS = 121_751_666


def _load_pt(path: Path):
    """A ``torch.save``d dict of ints and numpy arrays, with nothing else allowed to load."""
    import torch

    reconstruct = np.zeros(1).__reduce__()[0]  # numpy's array unpickler, under numpy 1's name or 2's
    allowed = [np.ndarray, np.dtype, (reconstruct, "numpy.core.multiarray._reconstruct"),
               (reconstruct, "numpy._core.multiarray._reconstruct"),
               *{type(np.dtype(kind)) for kind in ("int64", "int32", "float32", "float64")}]
    with torch.serialization.safe_globals(allowed):
        return torch.load(path, weights_only=True)


def widened_features(source: Path) -> np.ndarray:
    """``source``'s float16 rows as a float32 memory map beside it, written once (again where
    ``source`` was replaced since: :func:`~supergcn.data.written_once.array_written_once`)."""
    half = np.load(source, mmap_mode="r", allow_pickle=False)

    def widen(start, rows):
        rows[:] = half[start:start + len(rows)]
        release_pages(half)
    return array_written_once(source.with_name("node_feat.float32.npy"), half.shape, np.float32, widen, WIDEN_ROWS,
                              what="prepare: widening the float16 features", made_from=source)


def fetch_mag240m(root: Path) -> None:
    """Download, check and unpack OGB-LSC's MAG240M archive into ``root`` (the archive is
    removed once unpacked)."""
    from supergcn.data.download import download, unpack

    archive = download(ARCHIVE_URL, root / ARCHIVE_URL.rsplit("/", 1)[1], ARCHIVE_MD5,
                       extra_bytes=UNPACKED_BYTES + PAPERS * FEATURES * 4)
    unpack(archive, root, FOLDER)


def load_mag240m(root: str | Path) -> Graph:
    folder = Path(root) / FOLDER
    if not folder.is_dir() or not any(folder.iterdir()):
        fetch_mag240m(Path(root))
    files = {"meta": folder / "meta.pt", "split": folder / "split_dict.pt",
             "features": folder / "processed" / "paper" / "node_feat.npy",
             "labels": folder / "processed" / "paper" / "node_label.npy",
             "edges": folder / "processed" / "paper___cites___paper" / "edge_index.npy"}
    missing = [str(path) for path in files.values() if not path.is_file()]
    if missing:
        raise SuperGCNError(f"ogb-lsc-mag240M files not found: {', '.join(missing)}",
                            f"download {ARCHIVE_URL} (MD5 {ARCHIVE_MD5}) and unpack it into {Path(root)} "
                            "(or pass --raw-root)")
    with reading_raw("ogb-lsc-mag240M", folder):
        meta, split = _load_pt(files["meta"]), _load_pt(files["split"])
        half = np.load(files["features"], mmap_mode="r", allow_pickle=False)
        labels = np.load(files["labels"], mmap_mode="r", allow_pickle=False)
        edges = np.load(files["edges"], mmap_mode="r", allow_pickle=False)
        num_nodes, num_classes = int(meta["paper"]), int(meta["num_classes"])
        train, valid = (np.asarray(split[key], dtype=np.int64) for key in ("train", "valid"))
    problems = []
    if half.shape != (num_nodes, FEATURES) or half.dtype != np.float16:
        problems.append(f"node_feat.npy is {half.dtype}{list(half.shape)}, not float16[{num_nodes}, {FEATURES}]")
    if labels.shape != (num_nodes,):
        problems.append(f"node_label.npy holds {labels.size:,} labels for {num_nodes:,} papers")
    if edges.ndim != 2 or edges.shape[0] != 2 or edges.dtype.kind not in "iu":
        problems.append(f"edge_index.npy is {edges.dtype}{list(edges.shape)}, not 2 rows of paper ids")
    for name, ids in (("train", train), ("valid", valid)):
        if len(ids) and (ids.min() < 0 or ids.max() >= num_nodes):
            problems.append(f"split_dict.pt's {name} ids leave 0..{num_nodes - 1}")
    if problems:
        raise SuperGCNError(f"the ogb-lsc-mag240M files under {folder} disagree with meta.pt: " + "; ".join(problems),
                            "they are truncated or mixed: unpack the archive again")
    label_ids = np.full(num_nodes, -1, dtype=np.int64)
    labelled = np.concatenate([train, valid])
    values = np.asarray(labels[labelled], dtype=np.float64)
    if not np.all(np.isfinite(values) & (values >= 0) & (values < num_classes) & (values == np.round(values))):
        raise SuperGCNError(f"node_label.npy of ogb-lsc-mag240M gives training or validation papers no class "
                            f"among meta.pt's {num_classes}", "the file is damaged: unpack the archive again")
    label_ids[labelled] = values.astype(np.int64)
    masks = [np.zeros(num_nodes, dtype=bool) for _ in range(3)]
    masks[0][train] = True
    masks[1][valid] = True
    features = widened_features(files["features"])
    return build_graph("ogb-lsc-mag240M", edges[0], edges[1], features, label_ids, *masks,
                       provenance={"source": "OGB-LSC MAG240M, paper___cites___paper",
                                   "root": str(Path(root).resolve()), "made_undirected": True,
                                   "features": "float16 widened to float32 (node_feat.float32.npy beside the original)",
                                   "split": "published train and valid; no test split (its labels are hidden)"})
