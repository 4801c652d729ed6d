"""OGB node-property datasets (ogbn-arxiv, ogbn-products, ogbn-papers100M) via ``ogb``.

Offline behaviour, so that a batch job never hangs or fails obscurely:

* If the files are already under ``root/<name with underscores>``, nothing is downloaded.
* ``ogb`` asks an interactive "Will you update the dataset now?" when the folder exists
  but lacks ``RELEASE_v<version>.txt``; that case is detected first and reported as an
  error instead, and ``input()`` is disabled while ``ogb`` runs.
* ``ogb`` asks before downloading more than 1 GB; preparing the dataset is the
  user's explicit request, so that question is answered yes.
* A failed download names the folder where the files should be put.

Directed graphs (ogbn-arxiv, ogbn-papers100M) become undirected, as the paper does.
Nodes without a label (papers100M) get label -1 and are in no split.
"""

from __future__ import annotations

import builtins
import contextlib
import os
from pathlib import Path

import numpy as np

from supergcn.data.graph import Graph, build_graph
from supergcn.data.storage import reading_raw
from supergcn.errors import SuperGCNError


def _no_prompt(prompt: str = "") -> str:
    raise SuperGCNError(f"ogb asked an interactive question ({prompt.strip()!r}); supergcn runs unattended",
                        "put the dataset's files in place as docs/datasets.md describes")


@contextlib.contextmanager
def _unattended_ogb():
    import ogb.nodeproppred.dataset as ogb_dataset

    saved_input, saved_decide = builtins.input, ogb_dataset.decide_download
    saved_env = os.environ.get("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")
    builtins.input = _no_prompt
    ogb_dataset.decide_download = lambda url: True
    # ogb caches its processed dict with torch.save and reloads it with a bare
    # torch.load, which torch >= 2.6 refuses under its weights_only default.
    os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
    try:
        yield ogb_dataset
    finally:
        builtins.input, ogb_dataset.decide_download = saved_input, saved_decide
        if saved_env is None:
            os.environ.pop("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", None)
        else:
            os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = saved_env


def ogb_folder(name: str, root: str | Path) -> Path:
    return Path(root) / name.replace("-", "_")


def load_ogb(name: str, root: str | Path) -> Graph:
    import ogb.nodeproppred
    import pandas as pd

    master = pd.read_csv(Path(ogb.nodeproppred.__file__).parent / "master.csv", index_col=0, keep_default_na=False)
    folder = ogb_folder(name, root)
    release = folder / f"RELEASE_v{master[name]['version']}.txt"
    if folder.is_dir() and not release.exists():
        raise SuperGCNError(f"{folder} exists but lacks {release.name}, so ogb would ask whether to re-download it",
                            f"delete {folder} to download afresh, or create {release.name} if the files are current")
    if folder.is_dir():
        # The published archives ship an empty processed/ that ogb writes its cache into.
        (folder / "processed").mkdir(exist_ok=True)
    with _unattended_ogb() as ogb_dataset, reading_raw(name, folder):
        try:
            dataset = ogb_dataset.NodePropPredDataset(name=name, root=str(root))
        except OSError as exc:  # URLError and friends
            raise SuperGCNError(f"could not download {name} ({exc})",
                                f"on a machine with internet run `supergcn prepare {name}` there, or put the OGB "
                                f"files (raw/, split/, {release.name}) under {folder}") from exc
        split = dataset.get_idx_split()
    graph_dict, labels = dataset[0]
    num_nodes = int(graph_dict["num_nodes"])
    labels = np.asarray(labels, dtype=np.float64).reshape(-1)
    labels = np.where(np.isnan(labels), -1, labels).astype(np.int64)
    masks = []
    for key in ("train", "valid", "test"):
        mask = np.zeros(num_nodes, dtype=bool)
        mask[np.asarray(split[key])] = True
        masks.append(mask)
    src, dst = graph_dict["edge_index"]
    return build_graph(name, src, dst, graph_dict["node_feat"], labels, *masks,
                       provenance={"source": f"ogb NodePropPredDataset {name}", "root": str(Path(root).resolve()),
                                   "made_undirected": True})
