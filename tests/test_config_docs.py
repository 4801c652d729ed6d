"""config/README.md explains every key the config schema allows."""

import re

import yaml

from supergcn.train.config import TrainConfig, study_options
from supergcn.workflow_config import load_schema

from conftest import REPO

SCHEMA = REPO / "workflow" / "schemas" / "config.schema.yaml"


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
    schema = load_schema(SCHEMA)
    text = (REPO / "config" / "README.md").read_text()
    paths = list(dotted_paths(schema))
    assert "training.label_rate" in paths and "machines.<name>.latency_us" in paths and "perf.local.bits" in paths
    missing = [path for path in paths if f"`{path}`" not in text]
    assert not missing, f"config/README.md does not explain {missing}"


def documented_defaults(section: str) -> dict[str, str]:
    """The default column of config/README.md's rows of ``section``'s keys."""
    text = (REPO / "config" / "README.md").read_text()
    row = rf"^\| `{section}\.(\w+)` \| [^|]* \| `([^`]*)` \|"
    return dict(re.findall(row, text, re.M))


def test_every_training_option_is_documented_with_the_default_a_study_gets():
    """The training rows are the options TrainConfig declares for studies, each with its
    default, or the value config/config.yaml sets where it sets one."""
    documented = documented_defaults("training")
    assert sorted(documented) == sorted(study_options())
    properties = load_schema(SCHEMA)["properties"]["training"]["properties"]
    shipped = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["training"]
    for name in study_options():
        expected = shipped.get(name, properties[name]["default"])
        assert documented[name] == yaml.safe_dump(expected).removesuffix("\n...\n").strip(), name
    assert properties["hidden"]["default"] == TrainConfig.__dataclass_fields__["hidden"].default


def test_every_partition_option_is_documented_with_the_default_a_study_gets():
    """The partition rows are the options PartitionConfig declares, each with its default,
    or the value config/config.yaml sets where it sets one."""
    from supergcn.partition.config import PartitionConfig

    documented = documented_defaults("partition")
    properties = load_schema(SCHEMA)["properties"]["partition"]["properties"]
    assert sorted(documented) == sorted(properties) == sorted(PartitionConfig.__dataclass_fields__)
    shipped = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["partition"]
    for name, text in documented.items():
        assert yaml.safe_load(text) == shipped.get(name, properties[name]["default"]), name


def table_cells(line: str) -> list[str]:
    """The cells of a Markdown table row, a ``|`` inside backticks or escaped kept."""
    cells, cell, code = [], "", False
    body = line.strip()[1:-1] if line.strip().endswith("|") else line.strip()[1:]
    index = 0
    while index < len(body):
        char = body[index]
        if char == "\\" and index + 1 < len(body):
            cell += body[index:index + 2]
            index += 2
            continue
        if char == "`":
            code = not code
        if char == "|" and not code:
            cells.append(cell.strip())
            cell = ""
        else:
            cell += char
        index += 1
    return [*cells, cell.strip()]


def test_table_cells_by_hand():
    assert table_cells("| `a|b` | c \\| d | e |") == ["`a|b`", "c \\| d", "e"]


def test_every_table_row_has_its_tables_columns():
    """A row with a cell too many or too few renders wrongly (a default shown in the
    wrong column, a phantom row): every row of every table has its header's cells."""
    broken, columns = [], None
    for number, line in enumerate((REPO / "config" / "README.md").read_text().splitlines(), 1):
        if not line.startswith("|"):
            columns = None
            continue
        cells = table_cells(line)
        if columns is None:
            columns = len(cells)
        elif len(cells) != columns:
            broken.append(f"config/README.md:{number}: {len(cells)} cells, the table has {columns}")
    assert not broken, broken


def test_the_files_table_lists_every_config_file():
    """The Files table names every file of config/ and config/studies/, and no file that
    is gone (docs/studies.md sends readers there for the list of overlays)."""
    text = (REPO / "config" / "README.md").read_text()
    table = text[text.index("## Files"):text.index("\n## ", text.index("## Files") + 1)]
    listed = {cell for cell in re.findall(r"^\| `([^`]+)` \|", table, re.M) if cell.startswith("config/")}
    present = {path.relative_to(REPO).as_posix() for path in (REPO / "config").rglob("*.yaml")}
    assert listed == present
