"""The pipeline's config checked before any job: one line per problem, not a schema dump.

Snakemake's own ``validate`` prints the whole JSON schema beside a violation (hundreds of
lines); the Snakefile runs :func:`check_config` instead, which raises a
:class:`ConfigError` that Snakemake prints under its ``<type> in file Snakefile`` line as

    supergcn config: error: <key>: <what is wrong> — <how to fix it>
"""

from __future__ import annotations

import copy
from pathlib import Path

from supergcn.errors import SuperGCNError
from supergcn.naming import renamed_key_errors

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
    and the ``partition`` section's from :class:`~supergcn.partition.config.PartitionConfig`
    (:func:`supergcn.partition.config.schema_section`)."""
    import yaml

    from supergcn.options import schema_properties
    from supergcn.partition.config import schema_section
    from supergcn.train.config import TrainConfig

    schema = yaml.safe_load(Path(schema_path).read_text())
    properties = schema["properties"]
    properties["partition"].update(schema_section())
    properties["training"]["properties"] = schema_properties(TrainConfig)
    properties["training_by_dataset"]["additionalProperties"]["properties"] = schema_properties(TrainConfig,
                                                                                                per_dataset=True)
    return schema


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
    return [*renamed_key_errors(config),
            *(f"{'.'.join(map(str, error.absolute_path)) or 'the top level'}: {_wording(error)}"
              for error in violations)]


def _wording(error) -> str:
    """The schema's own ``message`` for the rule ``error`` broke, else jsonschema's."""
    return error.schema.get("message", error.message) if isinstance(error.schema, dict) else error.message


def check_config(config: dict, schema_path: str | Path) -> dict:
    """Raise a :class:`ConfigError` listing every problem of ``config``; else fill in its
    defaults (:func:`fill_defaults`) and return the schema."""
    schema = load_schema(schema_path)
    problems = config_problems(config, schema)
    if problems:
        raise ConfigError("; ".join(problems))
    fill_defaults(config, schema)
    return schema
