"""The files of a graph of your own, declared once (``docs/own-graph.md``).

Each file is one field of :class:`GraphFiles` (:func:`supergcn.options.option`). Derived
from them: the flags of ``supergcn prepare`` (``--edges``, ``--features``, ...), the
entries of a study config's ``own_datasets`` (:func:`schema_entry`) and the words the
prepare rule writes for such an entry (:func:`supergcn.options.command_line`). The graph
is read by :func:`supergcn.data.datasets.own_arrays.load_own_graph`.

Standard library only: the Snakefile reads these declarations while it parses.
"""

from __future__ import annotations

from dataclasses import dataclass

from supergcn.options import declared, option

#: The arrays of a split file, in the order of the masks they become.
SPLIT_KEYS = ("train", "val", "test")
#: The split of a graph given without one: shares of its labelled nodes, drawn from the
#: seed (as Facebook's, which ships none).
RANDOM_SPLIT = (0.6, 0.2, 0.2)


@dataclass(frozen=True)
class GraphFiles:
    """The NumPy files of a graph of your own; each field's help says what it holds."""

    edges: str = option(None, "the edge index: integer node ids, 2 x E (row 0 the sources, row 1 the "
                        "destinations, as PyG's edge_index; a 2 x 2 array is read so) or E x 2 (an edge a row); "
                        "made undirected, duplicates merged", required=True, study=True)
    features: str = option(None, "the features: N x F numbers, a row per node (N nodes, ids 0..N-1), cast "
                           "to float32", required=True, study=True)
    labels: str = option(None, "the labels: N integers, the classes 0..K-1 (each labelling some node), -1 "
                         "for a node without one", required=True, study=True)
    split: str | None = option(None, f"an .npz of {', '.join(SPLIT_KEYS)}: boolean masks of N, or arrays of "
                               "node ids (left out: the labelled nodes split at random, drawn from the seed, in "
                               f"shares {'/'.join(map(str, RANDOM_SPLIT))})", study=True)


def file_roles() -> list[str]:
    """The files of :class:`GraphFiles`, by the name of their flag (``--edges``) and config key.

    Returns:
        The field names, in declaration order.
    """
    return [field.name for field, _ in declared(GraphFiles)]


def required_roles() -> list[str]:
    """The files a graph of your own cannot do without.

    Returns:
        The names of the required fields of :class:`GraphFiles`.
    """
    return [field.name for field, spec in declared(GraphFiles) if spec["required"]]


def schema_entry() -> dict:
    """The JSON schema keywords of one entry of a study's ``own_datasets``.

    Returns:
        ``properties`` (each file a path: a non-empty string, its help as ``description``)
        and ``required`` (:func:`required_roles`).
    """
    properties = {field.name: {"type": "string", "minLength": 1, "description": spec["help"]}
                  for field, spec in declared(GraphFiles)}
    return {"properties": properties, "required": required_roles()}
