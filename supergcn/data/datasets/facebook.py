"""Facebook Page-Page (MUSAE, Rozemberczki et al. 2019) from its raw files.

``<root>/raw`` holds ``facebook_edges.csv`` (id_1,id_2), ``facebook_target.csv``
(id,facebook_id,page_name,page_type) and ``facebook.json`` (node id -> list of feature
ids). Features become dense binary indicator vectors; classes are the page types in
alphabetical order; the split is a seeded random 60/20/20, since none ships.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from supergcn.data.graph import Graph, build_graph, random_split
from supergcn.data.storage import reading_raw
from supergcn.errors import SuperGCNError

RAW_FILES = ("facebook_edges.csv", "facebook_target.csv", "facebook.json")
#: Where the files are published: SNAP's archive, whose names for them (the values) differ
#: from the ones read here.
ARCHIVE_URL = "https://snap.stanford.edu/data/facebook_large.zip"
ARCHIVE_NAMES = dict(zip(RAW_FILES, ("musae_facebook_edges.csv", "musae_facebook_target.csv",
                                     "musae_facebook_features.json")))
SPLIT = (0.6, 0.2, 0.2)


def load_facebook(root: str | Path, seed: int) -> Graph:
    raw = Path(root) / "raw"
    missing = [name for name in RAW_FILES if not (raw / name).is_file()]
    if missing:
        renames = ", ".join(f"{ARCHIVE_NAMES[name]} as {name}" for name in RAW_FILES)
        raise SuperGCNError(f"Facebook Page-Page raw files {missing} not found in {raw}",
                            f"download {ARCHIVE_URL} and put its files there ({renames}), or pass the --raw-root "
                            "that holds facebook_page_page/raw")
    with reading_raw("facebook", raw):
        edges = pd.read_csv(raw / "facebook_edges.csv")
        target = pd.read_csv(raw / "facebook_target.csv").sort_values("id")
        num_nodes = len(target)
        if not np.array_equal(target["id"].to_numpy(), np.arange(num_nodes)):
            raise SuperGCNError(f"{raw / 'facebook_target.csv'} does not number its nodes 0..n-1",
                                "restore the file from the MUSAE archive")
        classes = sorted(target["page_type"].unique())
        labels = target["page_type"].map({name: i for i, name in enumerate(classes)}).to_numpy()

        feature_lists = json.loads((raw / "facebook.json").read_text())
        rows = np.concatenate([np.full(len(ids), int(node)) for node, ids in feature_lists.items()])
        cols = np.concatenate([np.asarray(ids, dtype=np.int64) for ids in feature_lists.values()])
        features = np.zeros((num_nodes, int(cols.max()) + 1), dtype=np.float32)
        features[rows, cols] = 1.0

    masks = random_split(num_nodes, SPLIT, seed)
    return build_graph("facebook", edges["id_1"].to_numpy(), edges["id_2"].to_numpy(), features, labels, *masks,
                       provenance={"source": "MUSAE facebook_large raw files", "root": str(Path(root).resolve()),
                                   "classes": classes, "split": "seeded random 60/20/20", "seed": seed})
