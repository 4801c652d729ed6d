"""The pipeline's config checked before any job: one line per problem, not a schema dump.

Snakemake's own ``validate`` prints the whole JSON schema beside a violation (hundreds of
lines); the Snakefile runs :func:`check_config` instead, which raises a
:class:`ConfigError`, and reads the rules inside :func:`config_errors_reported`, which
prints such an error alone, as

    supergcn config: error: <key>: <what is wrong> — <how to fix it>

and ends Snakemake with status 2. A key the schema does not know is named with the known
key nearest to it (``training.epoch: unknown key (did you mean training.epochs?)``).
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from supergcn.errors import USER_ERROR, SuperGCNError, debugging
from supergcn.naming import RENAMED_CONFIG_KEYS, renamed_key_errors

#: Where every key is explained.
CONFIG_HELP = "fix it in your config file or overlay (every key is explained in config/README.md)"


class ConfigError(SuperGCNError):
    """A problem with the study's config, worded as the command line words its errors."""

    def __init__(self, what: str, fix: str = CONFIG_HELP) -> None:
        super().__init__(f"supergcn config: error: {what}", fix)


def load_schema(schema_path: str | Path) -> dict:
    """The config schema: the file's, with the ``training`` section's properties (and those
    ``training_by_dataset`` may set per dataset) derived from
    :class:`~supergcn.train.config.TrainConfig` (:func:`supergcn.options.schema_properties`),
    the ``partition`` section's from :class:`~supergcn.partition.config.PartitionConfig`
    (:func:`supergcn.partition.config.schema_section`), a variant's ``bits`` and the keys
    it names a method by from the methods' cards and options
    (:func:`_variant_properties`), and an ``own_datasets`` entry's from
    :class:`~supergcn.data.own_files.GraphFiles` (:func:`supergcn.data.own_files.schema_entry`)
    under a name of :data:`~supergcn.naming.DATASET_NAME`."""
    import yaml

    from supergcn.data.own_files import schema_entry
    from supergcn.naming import DATASET_NAME
    from supergcn.options import schema_properties
    from supergcn.partition.config import schema_section
    from supergcn.train.config import BIT_CHOICES, TrainConfig

    schema = yaml.safe_load(Path(schema_path).read_text())
    properties = schema["properties"]
    properties["partition"].update(schema_section())
    properties["training"]["properties"] = schema_properties(TrainConfig)
    properties["training_by_dataset"]["additionalProperties"]["properties"] = schema_properties(TrainConfig,
                                                                                                per_dataset=True)
    variant = properties["variants"]["items"]["properties"]
    variant["bits"] = {"enum": list(BIT_CHOICES)}
    variant.update(_variant_properties())
    properties["own_datasets"]["additionalProperties"].update(schema_entry())
    schema["$defs"]["own_dataset_name"]["pattern"] = f"^{DATASET_NAME}$"
    return schema


def _variant_properties() -> dict:
    """JSON schema properties of the keys a study's variant names a method by
    (:attr:`~supergcn.methods.card.VariantNaming.key`): each the schema of the option it
    sets, or, for a group, an object of the method's options, its selecting option required
    and switched on.

    Returns:
        Key -> JSON schema.
    """
    from supergcn.methods import method_cards
    from supergcn.options import declared, option_schema
    from supergcn.train.config import TrainConfig

    fields = {field.name: (field, spec) for field, spec in declared(TrainConfig)}
    properties = {}
    for method in method_cards():
        naming = method.naming
        if naming.key is None or naming.key in properties:
            continue
        if not naming.group:
            properties[naming.key] = option_schema(*fields[naming.key])
            continue
        group = {name: option_schema(*fields[name]) for name in method.option_names}
        selector = {key: value for key, value in group[method.option].items() if key != "default"}
        group[method.option] = {**selector, **naming.on}
        properties[naming.key] = {"type": "object", "additionalProperties": False, "required": [method.option],
                                  "properties": group}
    return properties


def declare_own_datasets(schema: dict, config: dict) -> None:
    """Let ``schema`` (:func:`load_schema`) take, wherever it takes a dataset, the names
    ``config`` declares under ``own_datasets`` besides the built-in ones; a name that is
    neither is refused with the declared ones, to spot a typo."""
    own = sorted(config.get("own_datasets") or {}) if isinstance(config.get("own_datasets"), dict) else []
    schema["$defs"]["own_dataset"]["enum"] = own
    schema["$defs"]["dataset"]["message"] += f" ({', '.join(own)})" if own else " (it declares none)"


def fill_defaults(config: dict, schema: dict, root: dict | None = None) -> None:
    """Set, in place, every key ``config`` leaves out that ``schema`` gives a default, in
    every mapping the schema describes (as Snakemake's ``validate`` does)."""
    root = schema if root is None else root
    if "$ref" in schema:
        schema = root["$defs"][schema["$ref"].rpartition("/")[2]]
    if isinstance(config, list) and isinstance(schema.get("items"), dict):
        for item in config:
            fill_defaults(item, schema["items"], root)
    if not isinstance(config, dict):
        return
    for key, child in schema.get("properties", {}).items():
        if key not in config and "default" in child:
            config[key] = copy.deepcopy(child["default"])
        if key in config:
            fill_defaults(config[key], child, root)
    free = schema.get("additionalProperties")
    if isinstance(free, dict):
        for key in set(config) - set(schema.get("properties", {})):
            fill_defaults(config[key], free, root)


def config_problems(config: dict, schema: dict) -> list[str]:
    """One line per renamed key and per violation of ``schema`` (:func:`load_schema`) by
    ``config``, in key order."""
    import jsonschema

    validator = jsonschema.validators.validator_for(schema)(schema)
    violations = sorted(validator.iter_errors(config), key=lambda error: [str(p) for p in error.absolute_path])
    return [*renamed_key_errors(config), *(problem for error in violations for problem in _problems(error))]


def _problems(error) -> list[str]:
    """The lines of one violation: one per unknown key (with the known key nearest to it),
    else one naming the key and what is wrong with it."""
    where = ".".join(map(str, error.absolute_path))
    if error.validator != "additionalProperties" or error.validator_value is not False:
        return [f"{where or 'the top level'}: {_wording(error)}"]
    known = list(error.schema.get("properties", {}))
    patterns = list(error.schema.get("patternProperties", {}))
    unknown = [key for key in error.instance if key not in known and not any(re.search(p, key) for p in patterns)
               and not (where == "" and key in RENAMED_CONFIG_KEYS)]  # those have their own line
    lines = []
    for key in unknown:
        near = difflib.get_close_matches(str(key), known, n=1)
        hint = f" (did you mean {'.'.join(filter(None, (where, near[0])))}?)" if near else ""
        lines.append(f"{'.'.join(filter(None, (where, str(key))))}: unknown key{hint}")
    return lines


def _wording(error) -> str:
    """The schema's own ``message`` for the rule ``error`` broke (``{value}`` in it: the value
    that broke it), else jsonschema's."""
    if not isinstance(error.schema, dict) or "message" not in error.schema:
        return error.message
    return error.schema["message"].replace("{value}", json.dumps(error.instance))


@contextlib.contextmanager
def config_errors_reported() -> Iterator[None]:
    """Print a :class:`ConfigError` raised in the ``with`` block as its one line, and end
    the process with status 2: Snakemake would print it under its own ``ConfigError in
    file Snakefile, line N:`` line and above the stack of the workflow's code, which the
    user's config did not break. With ``SUPERGCN_DEBUG=1`` the error passes unchanged."""
    try:
        yield
    except ConfigError as exc:
        if debugging():
            raise
        print(exc, file=sys.stderr, flush=True)
        raise SystemExit(USER_ERROR) from None


def check_config(config: dict, schema_path: str | Path) -> dict:
    """Raise a :class:`ConfigError` listing every problem of ``config``; else fill in its
    defaults (:func:`fill_defaults`) and return the schema."""
    schema = load_schema(schema_path)
    declare_own_datasets(schema, config)
    problems = config_problems(config, schema)
    if problems:
        raise ConfigError("; ".join(problems))
    fill_defaults(config, schema)
    missing = missing_files(config)
    if missing:
        raise ConfigError("; ".join(missing))
    return schema


def missing_files(config: dict) -> list[str]:
    """One line per file the config names that is not there, whatever is already built from
    it: each file of a graph of your own (``own_datasets``) the study uses, and the raw
    folder of a built-in dataset whose files are placed by hand
    (:attr:`~supergcn.data.published.Published.placed`). A moved or mistyped file is then
    noticed when the config is read, not when the graph is prepared again, which a study
    that has run does only after its results are gone.

    Args:
        config: the config, its defaults filled in.

    Returns:
        The lines, each naming the key and the path.
    """
    from supergcn.data.published import PUBLISHED

    perf = config.get("perf") or {}
    used = {*config.get("datasets", []), *perf.get("datasets", []), (perf.get("local") or {}).get("dataset")}
    lines = []
    for name, files in sorted((config.get("own_datasets") or {}).items()):
        for role, path in (files or {}).items():
            if name in used and path is not None and not Path(path).expanduser().is_file():
                lines.append(f"own_datasets.{name}.{role}: {path} does not exist — give the path of the file "
                             "(a study that has run reads it again whenever the graph is prepared)")
    for name in sorted(dataset for dataset in used if dataset in PUBLISHED and PUBLISHED[dataset].placed):
        folder = Path(config["raw_root"]).expanduser() / PUBLISHED[name].placed
        if not folder.is_dir():
            lines.append(f"raw_root: {folder} does not exist, and {name}'s files are placed there by hand — set "
                         f"raw_root to the folder that holds them, or put them there "
                         f"(`supergcn prepare {name} --raw-root <raw_root> --out x` says where each goes)")
    return lines


def measured_process_counts(local: dict, threads_per_rank: int, cores: int) -> list[int]:
    """The P at which ``supergcn bench comm`` measures the machine (``perf.local``).

    Where ``within_cores`` is on (a local run: the default), a P whose ranks x threads would
    outnumber ``cores`` is left out: eight ranks on two cores time the scheduler handing
    the cores round, not the exchange, and take minutes where two ranks take seconds. The
    smallest P is kept even so, and its result is marked oversubscribed. Cluster overlays
    turn it off, as each measurement there is a job of its own on nodes with the cores.

    Args:
        local: the config's ``perf.local``.
        threads_per_rank: the ranks' threads (``execution.threads_per_rank``).
        cores: the CPUs of the machine Snakemake runs on.

    Returns:
        The P, ascending.
    """
    counts = sorted(local["process_counts"])
    if not local.get("within_cores", True):
        return counts
    return [P for P in counts if P * threads_per_rank <= cores] or counts[:1]
