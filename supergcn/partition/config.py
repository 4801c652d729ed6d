"""How a graph is partitioned: every option of ``supergcn partition``, declared once.

Each option is a field of :class:`PartitionConfig` (:func:`supergcn.options.option`), and
what an engine cannot take is one entry of :data:`ENGINE_LIMITS`. Derived from them: the
command line of ``supergcn partition``; the ``partition`` section of a study's config
schema (keys, types, ranges, defaults, and the engines' limits with their messages:
:func:`schema_section`); the words of the command the partition rule runs
(:func:`supergcn.options.command_line`); the defaults of
:class:`~supergcn.partition.store.Engine` and
:func:`~supergcn.partition.store.run_partition`, and the check of their values
(:func:`engine_problems`). The graph, P and the output directory are the command's
inputs, not options: a study derives them from its datasets and process counts.

Standard library only: the Snakefile reads these declarations while it parses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from supergcn.naming import PARTITION_CONSTRAINTS, PARTITION_ENGINES
from supergcn.options import Range, option, schema_properties

#: KaMinPar's own presets are tuned for k up to this; beyond it the large-k preset applies.
LARGE_K = 1024
#: The command line's groups of partition options, in the order ``--help`` lists them.
GROUPS = {"balance": "what is balanced", "engine": "the partitioner"}


@dataclass(frozen=True)
class PartitionConfig:
    """The options of one partitioning; each field's help says what it takes."""

    constraints: tuple[str, ...] = option(
        PARTITION_CONSTRAINTS, "vertex weights to balance (vertex count, in-degree, training vertices; none: unit "
        "weights), each on its own with METIS, or folded into one weight (supergcn/partition/partition.py) with "
        "KaMinPar or --no-separate-constraints; RCM's equal row ranges balance the vertex count alone (nodes, or "
        "none)", choices=PARTITION_CONSTRAINTS, group="balance", study=True)
    seed: int = option(0, "the partitioner's random seed (RCM has none: 0)", group="balance", study=True,
                       study_values=Range(int, 0))
    separate_constraints: bool | None = option(
        None, "balance each constraint on its own (METIS's ncon weights, through the METIS library of the "
        "cmeel-metis wheel) or, with --no-separate-constraints, one weight folding them (pymetis, KaMinPar); "
        "unset, the engine's own: separate for METIS, folded for KaMinPar", group="balance", study=True)
    engine: str = option("metis", "metis (one thread, the reference), kaminpar (threaded, a few bytes per "
                         "adjacency entry, k in the thousands) or rcm (MixGCN's equal row ranges of the reverse "
                         "Cuthill-McKee order: one thread, one pass over the adjacency)", choices=PARTITION_ENGINES,
                         group="engine", study=True)
    threads: int = option(1, "KaMinPar's threads (METIS and RCM run on one)", values=Range(int, 1), group="engine",
                          study=True)
    kaminpar_preset: str = option("terapart", f"KaMinPar's preset up to {LARGE_K:,} parts (terapart presets "
                                  "keep the graph compressed)", group="engine", study=True)
    kaminpar_large_k_preset: str = option("terapart-largek", f"KaMinPar's preset beyond {LARGE_K:,} parts",
                                          group="engine", study=True)
    edge_fraction: float = option(
        1.0, "METIS sees this seeded share of the undirected edges, to bound its memory on huge graphs; the cut "
        "and balance are measured on the whole graph", values=Range(float, 0, 1, low_open=True), group="engine",
        study=True)


def default(name: str):
    """The declared default of one :class:`PartitionConfig` option.

    Args:
        name: the option's name.

    Returns:
        Its default.
    """
    return PartitionConfig.__dataclass_fields__[name].default


@dataclass(frozen=True)
class EngineLimit:
    """What an engine cannot take: under ``engine``, option ``name`` holds one of ``takes``
    only; ``why`` says why, as the start of a sentence.

    Args:
        engine: the engine (:data:`supergcn.naming.PARTITION_ENGINES`).
        name: the option (a field of :class:`PartitionConfig`).
        takes: the values it allows under ``engine`` (those of an option of several values: tuples).
        why: the reason, e.g. "KaMinPar partitions the whole graph".
    """

    engine: str
    name: str
    takes: tuple
    why: str

    def fix(self) -> str:
        """How to resolve a violation: the values allowed, or another engine.

        Returns:
            The words, naming the config key and its values as YAML writes them, and the
            engines that take every value of it (none limited there, as KaMinPar and RCM
            both are for ``separate_constraints``).
        """
        values = f"set it to {' or '.join(map(json.dumps, self.takes))}"
        others = [engine for engine in PARTITION_ENGINES
                  if not any(limit.engine == engine and limit.name == self.name for limit in ENGINE_LIMITS)]
        return f"{values}, or partition.engine to {' or '.join(others)}" if others else values


#: The options an engine takes fewer values of than the others.
ENGINE_LIMITS = (
    EngineLimit("kaminpar", "separate_constraints", (False, None), "KaMinPar balances one combined weight"),
    EngineLimit("kaminpar", "edge_fraction", (1,), "KaMinPar partitions the whole graph"),
    EngineLimit("rcm", "constraints", (("nodes",), ()), "RCM's equal row ranges balance the vertex count alone"),
    EngineLimit("rcm", "separate_constraints", (None,), "RCM balances no vertex weights"),
    EngineLimit("rcm", "seed", (0,), "RCM's order is deterministic, without a seed"),
    EngineLimit("rcm", "edge_fraction", (1,), "RCM orders the whole graph"),
)


def engine_problems(config: PartitionConfig) -> list[str]:
    """One message per option whose value the chosen engine cannot take (:data:`ENGINE_LIMITS`).

    Args:
        config: the partition options.

    Returns:
        The messages (empty when the engine takes every value), each naming the config
        key and the flag, the value, and the fix.
    """
    found = []
    for limit in ENGINE_LIMITS:
        value = getattr(config, limit.name)
        value = tuple(value) if isinstance(value, list) else value  # several values, as the command line gives them
        if limit.engine == config.engine and value not in limit.takes:
            flag = "--" + limit.name.replace("_", "-")
            found.append(f"{limit.why}: partition.{limit.name} ({flag}) cannot be {json.dumps(value)} — "
                         f"{limit.fix()}")
    return found


def schema_section() -> dict:
    """The ``properties`` of the study schema's ``partition`` section and the rules of
    :data:`ENGINE_LIMITS`, each violation worded by its ``message`` (read by
    :mod:`supergcn.workflow_config`).

    Returns:
        ``properties`` (:func:`supergcn.options.schema_properties`) and ``allOf``: one
        ``if`` engine / ``then`` values per engine with limits.
    """
    rules = []
    for engine in dict.fromkeys(limit.engine for limit in ENGINE_LIMITS):
        limited = {limit.name: {"enum": [list(value) if isinstance(value, tuple) else value for value in limit.takes],
                                "message": f"{limit.why}; {limit.fix()}"}
                   for limit in ENGINE_LIMITS if limit.engine == engine}
        rules.append({"if": {"properties": {"engine": {"const": engine}}, "required": ["engine"]},
                      "then": {"properties": limited}})
    return {"properties": schema_properties(PartitionConfig), "allOf": rules}
