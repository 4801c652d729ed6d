"""Loader benchmark: what converting each Table 2 source costs per adjacency entry.

    .venv/bin/python benchmarks/loaders.py [--entries 2000000 16000000] [--loaders igb mag240m uk proteins]
        [--workdir DIR]

For each loader and each target size it writes source files in that source's own format
(IGB's ``.npy`` arrays, OGB-LSC MAG240M's folder with float16 features and ``.pt`` files,
a BV-compressed WebGraph written by the tests' encoder, a Matrix Market file), with nodes
in the ratio of the real graph's adjacency entries per node, then runs ``supergcn
prepare``'s conversion (``prepare_dataset`` + ``save_graph``) in a fresh spawned process
that reports its own peak resident memory. It prints, per loader and size: the directed
adjacency entries, the seconds, the peak, the float32 features the step writes (the budget
counts them once: the prepare budget, at most 24 B per entry plus the features written once),
the peak per entry, and the peak less the features and the smallest size's peak, over the
entries added: the step's own bytes per entry, free of the interpreter and its libraries.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from supergcn.data.datasets import igb, law, mag240m, prepare_dataset, proteins
from supergcn.data.graph import save_graph
from supergcn.perf.steps import in_child, in_workdir
from supergcn.testing.bvgraph import encode_bvgraph

#: Adjacency entries per node of the real graphs (Table 2, undirected), the ratio the
#: written sources keep.
ENTRIES_PER_NODE = {"igb": 30, "mag240m": 43, "uk": 60, "proteins": 300}
DATASET = {"igb": "igb-tiny", "mag240m": "ogb-lsc-mag240M", "uk": "uk-2007-05", "proteins": "proteins"}
FEATURES = {"igb": igb.FEATURES, "mag240m": mag240m.FEATURES, "uk": law.FEATURES, "proteins": proteins.FEATURES}


def write_igb(root: Path, nodes: int, entries: int, rng) -> None:
    processed = root / "igb" / "tiny" / "processed"
    (processed / "paper").mkdir(parents=True)
    (processed / "paper__cites__paper").mkdir()
    features = np.lib.format.open_memmap(processed / "paper" / "node_feat.npy", "w+", np.float32, (nodes, igb.FEATURES))
    for start in range(0, nodes, 65_536):
        features[start:start + 65_536] = rng.random((min(65_536, nodes - start), igb.FEATURES), dtype=np.float32)
    features.flush()
    np.save(processed / "paper" / "node_label_19.npy", rng.integers(0, 19, nodes).astype(np.float32))
    np.save(processed / "paper__cites__paper" / "edge_index.npy", rng.integers(0, nodes, (entries // 2, 2)))


def write_mag240m(root: Path, nodes: int, entries: int, rng) -> None:
    import torch

    folder = root / "ogb_lsc" / mag240m.FOLDER
    (folder / "processed" / "paper").mkdir(parents=True)
    (folder / "processed" / "paper___cites___paper").mkdir()
    torch.save({"paper": nodes, "author": 0, "institution": 0, "num_classes": 153}, folder / "meta.pt")
    order = rng.permutation(nodes)
    torch.save({"train": np.sort(order[:nodes // 100]), "valid": np.sort(order[nodes // 100:nodes // 80]),
                "test": np.sort(order[nodes // 80:nodes // 60])}, folder / "split_dict.pt")
    features = np.lib.format.open_memmap(folder / "processed" / "paper" / "node_feat.npy", "w+", np.float16,
                                         (nodes, mag240m.FEATURES))
    for start in range(0, nodes, 65_536):
        features[start:start + 65_536] = rng.random((min(65_536, nodes - start), mag240m.FEATURES))
    features.flush()
    labels = np.full(nodes, np.nan)
    labels[order[:nodes // 80]] = rng.integers(0, 153, nodes // 80)
    np.save(folder / "processed" / "paper" / "node_label.npy", labels)
    edges = rng.integers(0, nodes, (2, entries // 2))
    np.save(folder / "processed" / "paper___cites___paper" / "edge_index.npy", edges)


def write_uk(root: Path, nodes: int, entries: int, rng) -> None:
    """Web-like lists: each page links to a run of its host's pages and to a few others."""
    degree = max(2, entries // nodes // 2)
    lists = []
    for x in range(nodes):
        host = x - x % 64
        run = list(range(host, min(nodes, host + degree // 2)))
        lists.append(sorted(set(run) | set(rng.integers(0, nodes, degree - len(run)).tolist())))
    (root / "law" / law.BASENAME).mkdir(parents=True)
    encode_bvgraph(root / "law" / law.BASENAME / law.BASENAME, lists)


def write_proteins(root: Path, nodes: int, entries: int, rng) -> None:
    import pandas as pd

    (root / "proteins").mkdir(parents=True)
    rows, cols = rng.integers(1, nodes + 1, (2, entries // 2))
    with open(root / "proteins" / proteins.FILE, "w") as handle:
        handle.write(f"%%MatrixMarket matrix coordinate pattern general\n{nodes} {nodes} {len(rows)}\n")
        pd.DataFrame({"i": rows, "j": cols}).to_csv(handle, sep=" ", header=False, index=False)


WRITERS = {"igb": write_igb, "mag240m": write_mag240m, "uk": write_uk, "proteins": write_proteins}


def prepare_step(dataset: str, raw_root: Path, out: Path) -> dict:
    return save_graph(prepare_dataset(dataset, raw_root, seed=0), out)


def measure(loader: str, entries: int, workdir: Path) -> dict:
    nodes = entries // ENTRIES_PER_NODE[loader]
    raw = workdir / f"{loader}-{entries}" / "raw"
    WRITERS[loader](raw, nodes, entries, np.random.default_rng(0))
    meta, cost = in_child(prepare_step, DATASET[loader], raw, raw.parent / "graph")
    return {"loader": loader, "entries": meta["num_edges_directed"], "nodes": meta["num_nodes"],
            "feature_bytes": meta["num_nodes"] * FEATURES[loader] * 4, **cost}


def report(rows: list[dict]) -> str:
    lines = ["| loader | entries | seconds | peak GiB | features GiB | peak B/entry | step's own B/entry |",
             "|---|---|---|---|---|---|---|"]
    for loader in dict.fromkeys(row["loader"] for row in rows):
        mine = sorted((row for row in rows if row["loader"] == loader), key=lambda row: row["entries"])
        smallest = mine[0]
        for row in mine:
            peak = row["peak_gib"] * 2**30
            own = "—"
            if row is not smallest:
                added = peak - smallest["peak_gib"] * 2**30 - row["feature_bytes"] + smallest["feature_bytes"]
                own = f"{added / (row['entries'] - smallest['entries']):.1f}"
            lines.append(f"| {loader} | {row['entries']:,} | {row['seconds']:.1f} | {row['peak_gib']:.2f} | "
                         f"{row['feature_bytes'] / 2**30:.2f} | {peak / row['entries']:.1f} | {own} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, nargs="+", default=[2_000_000, 16_000_000],
                        help="target directed adjacency entries of the written sources (the smallest is the baseline)")
    parser.add_argument("--loaders", nargs="+", choices=sorted(WRITERS), default=list(WRITERS))
    parser.add_argument("--workdir", type=Path, help="keep the sources and graphs here (else a temporary directory)")
    print(report(in_workdir(parser.parse_args(), run)))


def run(args, workdir: Path) -> list[dict]:
    rows = []
    for loader in args.loaders:
        for entries in sorted(args.entries):
            rows.append(measure(loader, entries, workdir))
            print(rows[-1], flush=True)
    return rows


if __name__ == "__main__":
    main()
