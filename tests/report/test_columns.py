"""The column glossary (:mod:`supergcn.report.columns`) is the columns the tables are written
with: every table built by its command, each column with its entry, no entry without its
column."""

import re

import pandas as pd
import pytest
from test_tables import minibatch_epoch, write_run

from supergcn.cli import main
from supergcn.data.storage import write_json
from supergcn.naming import PERF_TABLES, TABLES
from supergcn.perf import study
from supergcn.perf.machines import save_profile
from supergcn.perf.prediction import MachineProfile
from supergcn.report.columns import COLUMNS, Column, undeclared_columns

from conftest import REPO


@pytest.fixture(scope="module")
def written(tiny_plans, tmp_path_factory) -> dict[str, list[str]]:
    """Table name -> its CSV's header, from ``supergcn tables`` (every optional table, a
    speed-up baseline, a variant without a P = 1 run, a mini-batch run) and ``supergcn perf
    tables`` (with validation) on small inputs."""
    root = tmp_path_factory.mktemp("columns")
    runs = [write_run(root / f"{strategy}{parts}.jsonl", parts, {"dense": 1.0 / parts}, [2**30],
                      header={"strategy": strategy}) for strategy, parts in (("hybrid", 1), ("hybrid", 2),
                                                                             ("post", 2))]
    runs.append(write_run(root / "mb2.jsonl", 2, {"dense": 0.5}, [2**30],
                          minibatch=[minibatch_epoch(4, [0.5, 0.25], [2, 4])] * 3, batch_size=64, fanouts="5,10",
                          hec_size=100, hec_push=10, hec_life=2, hec_delay=1, hec_flush=False))
    plans = tiny_plans
    assert main(["tables", "--runs", *runs, "--plans", f"tiny={plans / 'P2-hybrid'}", "--graphs", plans / "graph",
                 "--partitions", plans / "P2", "--plan-dirs", plans / "P2-pre", plans / "P2-hybrid",
                 "--baseline", "post-fp32-nolp", "--absolute-targets", "30", "--out-dir", root / "tables"]) == 0
    machine = MachineProfile("fast", 1e-7, 1e10, 5e10, 5e10)
    write_json(root / "prediction.json", study.predict(plans / "graph", plans / "P2", plans / "P2-hybrid", [machine],
                                                       hidden=32, num_layers=3, bits=[2]))
    save_profile(machine, root / "profile.json")
    exchange = {"plan": str(plans / "P2-hybrid"), "strategy": "hybrid", "features": 32, "bits": 2,
                "parameter_dtype": "bfloat16", "seconds": {"total": 1e-3, "communication": 6e-4, "quantization": 3e-4}}
    write_json(root / "bench.json", {"num_ranks": 2, "oversubscribed": False, "exchanges": [exchange]})
    assert main(["perf", "tables", "--predictions", root / "prediction.json", "--validation", root / "bench.json",
                 "--profile", root / "profile.json", "--out-dir", root / "perf"]) == 0
    return {name: list(pd.read_csv(root / ("perf" if name in PERF_TABLES else "tables") / f"{name}.csv",
                                   nrows=0).columns) for name in (*TABLES, *PERF_TABLES)}


def test_every_written_column_has_its_entry_and_every_entry_its_column(written):
    assert list(COLUMNS) == [*TABLES, *PERF_TABLES]
    for table, headers in written.items():
        assert undeclared_columns(table, headers) == [], table
        stale = [column.name for column in COLUMNS[table] if not any(column.matches(h) for h in headers)]
        assert stale == [], table


def test_the_glossary_lists_each_tables_columns_in_the_order_it_writes_them(written):
    for table, headers in written.items():
        entries = [next(i for i, column in enumerate(COLUMNS[table]) if column.matches(h)) for h in headers]
        assert entries == sorted(entries), table


def test_a_placeholder_stands_for_any_text_and_only_there():
    column = Column("speedup_vs_<variant>", "x", "")
    assert column.matches("speedup_vs_post-fp32-nolp") and not column.matches("speedup_vs_")
    assert not column.matches("speedup") and not Column("P", "", "").matches("PP")


def test_the_outputs_page_renders_every_tables_glossary_once():
    rendered = re.findall(r"```\{column-glossary\} (\S+)\n```", (REPO / "docs" / "outputs.md").read_text())
    assert sorted(rendered) == sorted(COLUMNS)
