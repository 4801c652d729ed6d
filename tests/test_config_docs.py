"""config/README.md explains every key the config schema allows."""

import yaml

from conftest import REPO


def dotted_paths(schema, prefix=""):
    """Every key path of the schema: ``a.b`` for nested mappings, ``a.<name>.b`` under
    mappings with free keys; list items add no segment."""
    node = schema.get("items", schema) if schema.get("type") == "array" else schema
    for key, child in node.get("properties", {}).items():
        path = f"{prefix}{key}"
        yield path
        yield from dotted_paths(child, f"{path}.")
    free = node.get("additionalProperties")
    if isinstance(free, dict) and (free.get("properties") or free.get("type") == "object"):
        yield from dotted_paths(free, f"{prefix}<name>.")


def test_every_schema_key_is_explained():
    schema = yaml.safe_load((REPO / "workflow" / "schemas" / "config.schema.yaml").read_text())
    text = (REPO / "config" / "README.md").read_text()
    paths = list(dotted_paths(schema))
    assert "training.label_rate" in paths and "machines.<name>.latency_us" in paths and "perf.local.bits" in paths
    missing = [path for path in paths if f"`{path}`" not in text]
    assert not missing, f"config/README.md does not explain {missing}"
