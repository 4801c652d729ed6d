"""Datasets read through PyTorch Geometric: Planetoid (Cora, CiteSeer, PubMed), Reddit.

PyG writes a ``processed/`` folder next to ``raw/``. To keep a shared, read-only raw
copy untouched, raw files that already exist are copied into a scratch directory and
processed there; only when they are missing does PyG download into ``root`` (online).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np

from supergcn.data.graph import Graph, build_graph
from supergcn.data.storage import reading_raw
from supergcn.errors import SuperGCNError

PLANETOID_NAMES = {"cora": "Cora", "citeseer": "CiteSeer", "pubmed": "PubMed"}


def _from_pyg(name: str, data, provenance: dict) -> Graph:
    src, dst = data.edge_index.numpy()
    return build_graph(name, src, dst, data.x.numpy(), data.y.numpy(), data.train_mask.numpy(),
                       data.val_mask.numpy(), data.test_mask.numpy(), provenance=provenance)


def _quiet(dataset_class):
    """``dataset_class`` without PyG's ``Processing...`` and ``Done!`` lines: ``supergcn
    prepare`` says in its own line what it prepared. PyG prints them when the dataset's
    ``log`` attribute is true, which its ``__init__`` sets and these datasets do not let a
    caller pass; a download still says ``Downloading <url>``."""
    return type(dataset_class.__name__, (dataset_class,), {"log": property(lambda self: False,
                                                                            lambda self, value: None)})


def _load_processed_copy(dataset_class, root: Path, raw_subdir: Path, **kwargs):
    """Instantiate ``dataset_class`` on a scratch copy of ``raw_subdir`` if it exists,
    otherwise on ``root`` itself (which downloads)."""
    dataset_class = _quiet(dataset_class)
    if raw_subdir.is_dir() and any(raw_subdir.iterdir()):
        with tempfile.TemporaryDirectory(prefix="supergcn-pyg-") as scratch, reading_raw(dataset_class.__name__,
                                                                                          raw_subdir):
            shutil.copytree(raw_subdir, Path(scratch) / raw_subdir.relative_to(root))
            return dataset_class(root=scratch, **kwargs)[0]
    try:
        return dataset_class(root=str(root), **kwargs)[0]
    except OSError as exc:  # URLError is an OSError
        raise SuperGCNError(f"no raw files under {raw_subdir} and the download failed ({exc})",
                            f"put the dataset's raw files in {raw_subdir}, or run where the internet is reachable"
                            ) from exc


def load_planetoid(name: str, root: str | Path) -> Graph:
    """Public Planetoid split (Yang et al. 2016). ``root`` holds ``<Name>/raw/ind.*``."""
    from torch_geometric.datasets import Planetoid

    pyg_name = PLANETOID_NAMES[name]
    root = Path(root)
    data = _load_processed_copy(Planetoid, root, root / pyg_name / "raw", name=pyg_name)
    return _from_pyg(name, data, {"source": f"torch_geometric Planetoid {pyg_name}", "root": str(root.resolve()),
                                  "split": "public"})


def load_reddit(root: str | Path) -> Graph:
    """Reddit (Hamilton et al. 2017) with its published split, downloaded by PyG."""
    from torch_geometric.datasets import Reddit

    root = Path(root)
    data = _load_processed_copy(Reddit, root, root / "raw")
    graph = _from_pyg("reddit", data, {"source": "torch_geometric Reddit", "root": str(root.resolve())})
    if not np.any(graph.train_mask):
        raise SuperGCNError("Reddit loaded without training nodes: the download is damaged", "delete it and rerun")
    return graph
