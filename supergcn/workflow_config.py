"""The pipeline's config checked before any job: one line per problem, not a schema dump.

Snakemake's own ``validate`` prints the whole JSON schema beside a violation (hundreds of
lines); the Snakefile first runs :func:`config_problems` and raises a
:class:`ConfigError`, which Snakemake prints under its ``<type> in file Snakefile`` line as

    supergcn config: error: <key>: <what is wrong> — <how to fix it>
"""

from __future__ import annotations

from pathlib import Path

from supergcn.errors import SuperGCNError
from supergcn.naming import renamed_key_errors

#: Where every key is explained.
CONFIG_HELP = "fix it in your config file or overlay (every key is explained in config/README.md)"


class ConfigError(SuperGCNError):
    """A problem with the study's config, worded as the command line words its errors."""

    def __init__(self, what: str, fix: str = CONFIG_HELP) -> None:
        super().__init__(f"supergcn config: error: {what}", fix)


def config_problems(config: dict, schema_path: str | Path) -> list[str]:
    """One line per renamed key and per schema violation of ``config``, in key order."""
    import jsonschema
    import yaml

    schema = yaml.safe_load(Path(schema_path).read_text())
    validator = jsonschema.validators.validator_for(schema)(schema)
    violations = sorted(validator.iter_errors(config), key=lambda error: [str(p) for p in error.absolute_path])
    return [*renamed_key_errors(config),
            *(f"{'.'.join(map(str, error.absolute_path)) or 'the top level'}: {error.message}"
              for error in violations)]


def check_config(config: dict, schema_path: str | Path) -> None:
    """Raise a :class:`ConfigError` listing every problem of ``config``."""
    problems = config_problems(config, schema_path)
    if problems:
        raise ConfigError("; ".join(problems))
