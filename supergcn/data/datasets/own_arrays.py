"""A graph of your own from NumPy files (``docs/own-graph.md``): the files of
:class:`~supergcn.data.own_files.GraphFiles`, each a ``.npy`` array (memory-mapped, so
only what a cast needs is copied) or an ``.npz`` archive (read whole).

An archive holding one array gives it, whatever its name; one holding several gives the
array named after the file's role (``edges``, ``features``, ``labels``), so that one
archive can hold them all. A split file gives its arrays ``train``, ``val`` and ``test``.

The node count N is the features' rows. Every file is checked before the graph is built:
shapes, dtypes, node ids within 0..N-1, labels that are classes 0..K-1 (or -1, a node
without a label), splits that are disjoint and select labelled nodes; each refusal names
the file and the fix. The edges are then made undirected, de-duplicated and their self
loops kept once by :func:`~supergcn.data.graph.build_graph`, as every loader's are; the
features' NaN and infinite values are counted (and refused unless allowed) by
:func:`~supergcn.data.graph.save_graph`. The manifest's provenance records each file's
path, size and blake2b digest.
"""

from __future__ import annotations

import hashlib
import re
import zipfile
from pathlib import Path

import numpy as np

from supergcn.data.csr import ROW_BLOCK_ENTRIES
from supergcn.data.digests import feed_file
from supergcn.data.graph import Graph, build_graph, random_split
from supergcn.data.keys import unique_sorted
from supergcn.data.own_files import RANDOM_SPLIT, SPLIT_KEYS, GraphFiles, required_roles
from supergcn.errors import SuperGCNError, first_line
from supergcn.naming import DATASET_NAME
from supergcn.progress import progress, running

#: The fix of a file numpy cannot read.
_WRITE_IT = "write it with numpy.save (one array) or numpy.savez (several), allow_pickle off"


def load_own_graph(name: str, files: GraphFiles, seed: int = 0) -> Graph:
    """The graph ``name`` read from ``files`` (see the module docstring).

    Args:
        name: its name (:data:`supergcn.naming.DATASET_NAME`), as the later steps show it.
        files: its files; ``split`` may be None.
        seed: seed of the random split drawn when ``files.split`` is None.

    Returns:
        The validated, canonical (undirected, de-duplicated) graph; its provenance names the files.

    Raises:
        SuperGCNError: a bad name, a required file not given, or a file missing, unreadable
            or of the wrong shape, dtype or values (each message names the file and the fix).
    """
    if not re.fullmatch(DATASET_NAME, name):
        raise SuperGCNError(f"--name {name!r} is not a dataset name the pipeline's paths take",
                            "use letters, digits, '-' and '_' only")
    missing = [f"--{role}" for role in required_roles() if getattr(files, role) is None]
    if missing:
        raise SuperGCNError(f"your own graph {name!r} needs {' and '.join(missing)} too",
                            "give the edges, features and labels files (docs/own-graph.md)")
    paths = {role: _existing(role, path) for role, path in vars(files).items() if path is not None}
    features = _features(_array(paths["features"], "features"), paths["features"])
    num_nodes = features.shape[0]
    src, dst, layout = _edges(_array(paths["edges"], "edges"), paths["edges"], num_nodes)
    labels = _labels(_array(paths["labels"], "labels"), paths["labels"], num_nodes)
    if "split" in paths:
        masks, split = _split(paths["split"], labels), f"from {paths['split'].name}"
    else:
        masks = random_split(num_nodes, RANDOM_SPLIT, seed, labelled=labels >= 0)
        split = f"the labelled nodes at random, in shares {'/'.join(map(str, RANDOM_SPLIT))}"
    provenance = {"source": "your own NumPy files", "files": _described(paths), "edge_layout": layout,
                  "edges_in_file": len(src), "split": split}
    if "split" not in paths:
        provenance["seed"] = seed
    return build_graph(name, src, dst, features, labels, *masks, provenance=provenance)


def _existing(role: str, path: str) -> Path:
    """``path`` (``~`` expanded) of the ``role`` file, which must exist."""
    found = Path(path).expanduser()
    if not found.is_file():
        raise SuperGCNError(f"the {role} file {found} does not exist",
                            "check the path (relative to the directory the command runs in)")
    return found


def _load(path: Path, role: str):
    """``np.load`` of a user's file (a ``.npy`` memory-mapped), its failures in one line."""
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:  # numpy's words for a foreign file
        # numpy takes a file that is no .npy or .npz for a pickle, which it then refuses to load.
        why = "pickled Python objects, not loaded" if "pickle" in str(exc) else \
            f"{type(exc).__name__}: {first_line(exc)}"
        raise SuperGCNError(f"the {role} file {path} is not a NumPy .npy or .npz file ({why})", _WRITE_IT) from exc


def _member(archive, path: Path, role: str, key: str) -> np.ndarray:
    """Array ``key`` of an ``.npz`` archive, its failures in one line."""
    try:
        with running(f"prepare: reading {key} of {path.name}"):
            return archive[key]
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise SuperGCNError(f"the {role} file {path} holds an array {key} numpy cannot read "
                            f"({type(exc).__name__}: {first_line(exc)})", _WRITE_IT) from exc


def _array(path: Path, role: str) -> np.ndarray:
    """The ``role`` array of the file ``path`` (module docstring)."""
    loaded = _load(path, role)
    if isinstance(loaded, np.ndarray):
        return loaded
    with loaded as archive:
        keys = list(archive.keys())
        if len(keys) != 1 and role not in keys:
            raise SuperGCNError(f"the {role} file {path} holds {len(keys)} arrays ({', '.join(keys) or 'none'}), "
                                f"none named {role}",
                                f"name it {role} (numpy.savez(path, {role}=...)) or save it alone")
        return _member(archive, path, role, role if role in keys else keys[0])


def _shape(array: np.ndarray) -> str:
    return f"array of shape {tuple(array.shape)} and dtype {array.dtype}"


def _nodes(count: int) -> str:
    return f"{count:,} node{'s' * (count != 1)}"


def _features(array: np.ndarray, path: Path) -> np.ndarray:
    if array.ndim != 2 or 0 in array.shape:
        raise SuperGCNError(f"the features file {path} holds an {_shape(array)}: not N x F (a row of at least one "
                            "feature per node)", "save one row per node: features.reshape(num_nodes, -1)")
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_) or np.iscomplexobj(array):
        raise SuperGCNError(f"the features file {path} holds {array.dtype} values, not real numbers",
                            "save them as numbers: features.astype(np.float32)")
    return array


def _edges(array: np.ndarray, path: Path, num_nodes: int) -> tuple[np.ndarray, np.ndarray, str]:
    """Sources, destinations and the layout of an edge index, its node ids checked."""
    if array.ndim == 2 and array.shape[0] == 2:
        src, dst, layout = array[0], array[1], "2 x E"
    elif array.ndim == 2 and array.shape[1] == 2:
        src, dst, layout = array[:, 0], array[:, 1], "E x 2"
    else:
        raise SuperGCNError(f"the edges file {path} holds an {_shape(array)}: neither 2 x E nor E x 2",
                            "save the edge index as 2 x E (sources in row 0, destinations in row 1: PyG's edge_index)")
    if not np.issubdtype(array.dtype, np.integer):
        raise SuperGCNError(f"the edges file {path} holds {array.dtype} node ids, not integers",
                            "save them as integers: edges.astype(np.int64)")
    with progress("prepare: checking the edges' node ids", total=2 * len(src), unit="id", scale=True) as bar:
        outside = [found for ends in (src, dst) if (found := _first_outside(ends, num_nodes, bar)) is not None]
    if outside:
        edge, node = min(outside)
        raise SuperGCNError(f"the edges file {path} names node {node} (edge {edge:,}), outside the {num_nodes:,} "
                            f"nodes the features file has rows for (0..{num_nodes - 1})",
                            "number the nodes 0..N-1, a features row each")
    return src, dst, layout


def _first_outside(ids: np.ndarray, num_nodes: int, bar=None) -> tuple[int, int] | None:
    """(position, id) of the first of ``ids`` outside 0..num_nodes-1, read a block at a
    time (a memory-mapped file is never whole in memory), or None."""
    for start in range(0, len(ids), ROW_BLOCK_ENTRIES):
        block = np.asarray(ids[start:start + ROW_BLOCK_ENTRIES])
        bad = (block < 0) | (block >= num_nodes)
        if bad.any():
            first = int(np.argmax(bad))
            return start + first, int(block[first])
        if bar is not None:
            bar.update(len(block))
    return None


def _labels(array: np.ndarray, path: Path, num_nodes: int) -> np.ndarray:
    """The labels as int64, checked: one per node, integers, classes 0..K-1 each used, -1 for none."""
    if array.shape not in ((num_nodes,), (num_nodes, 1)):
        raise SuperGCNError(f"the labels file {path} holds an {_shape(array)}, not one label for each of the "
                            f"{num_nodes:,} nodes the features file has rows for",
                            "save one label per node, -1 for a node without one")
    if not np.issubdtype(array.dtype, np.integer):
        raise SuperGCNError(f"the labels file {path} holds {array.dtype} labels, not integers",
                            "save them as integers, -1 for a node without one: labels.astype(np.int64)")
    labels = np.asarray(array, dtype=np.int64).reshape(-1)
    if np.any(labels < -1):
        node = int(np.argmax(labels < -1))
        count = int(np.count_nonzero(labels < -1))
        raise SuperGCNError(f"the labels file {path} holds {count:,} label{'s' * (count != 1)} below -1 "
                            f"(the first, {labels[node]}, at node {node})",
                            "labels are the classes 0..K-1, and -1 for a node without one")
    classes = unique_sorted(labels[labels >= 0])
    if len(classes) == 0:
        raise SuperGCNError(f"the labels file {path} labels no node (every label is -1)",
                            "label the nodes to train on with their classes 0..K-1")
    if classes[-1] + 1 != len(classes):
        unused = int(np.flatnonzero(classes != np.arange(len(classes)))[0])
        raise SuperGCNError(f"the labels file {path} uses {len(classes):,} classes but numbers them up to "
                            f"{classes[-1]} (class {unused} labels no node): the model would get "
                            f"{classes[-1] + 1:,} outputs", "number the classes 0..K-1, e.g. with "
                            "np.unique(labels[labels >= 0], return_inverse=True), keeping -1 where there is none")
    return labels


def _split(path: Path, labels: np.ndarray) -> list[np.ndarray]:
    """The train, validation and test masks of a split file, checked against ``labels``."""
    num_nodes = len(labels)
    loaded = _load(path, "split")
    if isinstance(loaded, np.ndarray):
        raise SuperGCNError(f"the split file {path} is one .npy array, not an .npz of {', '.join(SPLIT_KEYS)}",
                            "save it with numpy.savez(path, train=..., val=..., test=...)")
    with loaded as archive:
        absent = [key for key in SPLIT_KEYS if key not in archive.keys()]
        if absent:
            raise SuperGCNError(f"the split file {path} holds no {' or '.join(absent)} (it holds "
                                f"{', '.join(archive.keys()) or 'nothing'})",
                                "save it with numpy.savez(path, train=..., val=..., test=...)")
        masks = [_mask(_member(archive, path, "split", key), path, key, num_nodes) for key in SPLIT_KEYS]
    chosen = masks[0].astype(np.int8) + masks[1] + masks[2]
    if np.any(chosen > 1):
        node = int(np.argmax(chosen > 1))
        sets = " and ".join(key for key, mask in zip(SPLIT_KEYS, masks) if mask[node])
        raise SuperGCNError(f"the split file {path} puts {_nodes(int(np.count_nonzero(chosen > 1)))} in more than one "
                            f"of {', '.join(SPLIT_KEYS)} (the first, node {node}, in {sets})",
                            "make the three sets disjoint")
    for key, mask in zip(SPLIT_KEYS, masks):
        unlabelled = mask & (labels < 0)
        if unlabelled.any():
            raise SuperGCNError(f"the split file {path} puts {_nodes(int(np.count_nonzero(unlabelled)))} without a "
                                f"label (-1) in {key} (the first, node {int(np.argmax(unlabelled))})",
                                "leave unlabelled nodes out of the split, or label them")
    if not masks[0].any():
        raise SuperGCNError(f"the split file {path} has no node in train", "put the nodes to train on in train")
    return masks


def _mask(array: np.ndarray, path: Path, key: str, num_nodes: int) -> np.ndarray:
    """A split file's array ``key`` as a boolean mask: a mask of ``num_nodes``, or node ids."""
    if array.dtype == np.bool_:
        if array.shape != (num_nodes,):
            raise SuperGCNError(f"the split file {path} has a {key} mask of shape {tuple(array.shape)}, not one "
                                f"entry for each of the {num_nodes:,} nodes", "save a mask of N booleans or node ids")
        return np.array(array)
    if not np.issubdtype(array.dtype, np.integer) or array.ndim != 1:
        raise SuperGCNError(f"the split file {path} has as {key} an {_shape(array)}: neither a boolean mask nor "
                            "a list of node ids", "save a mask of N booleans or a 1-D array of integer node ids")
    outside = _first_outside(array, num_nodes)
    if outside is not None:
        raise SuperGCNError(f"the split file {path} lists node {outside[1]} in {key}, outside the {num_nodes:,} "
                            f"nodes (0..{num_nodes - 1})", "list node ids 0..N-1")
    mask = np.zeros(num_nodes, dtype=bool)
    mask[array] = True
    return mask


def _described(paths: dict[str, Path]) -> dict[str, dict]:
    """What the manifest records of each file: its absolute path, size and blake2b digest
    (a file given for several roles is read once)."""
    digests: dict[Path, str] = {}
    described = {}
    for role, path in paths.items():
        path = path.resolve()
        if path not in digests:
            digests[path] = feed_file(path, hashlib.blake2b(digest_size=16),
                                      f"prepare: digest of {path.name}").hexdigest()
        described[role] = {"path": str(path), "bytes": path.stat().st_size, "blake2b": digests[path]}
    return described
