"""The command line: each step end to end, and one clear line for each kind of bad input."""

import json
import re

import numpy as np
import pytest

from conftest import run_cli


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    assert run_cli("prepare", "synthetic-tiny", "--out", root / "g").returncode == 0
    assert run_cli("prepare", "synthetic-tiny", "--seed", "1", "--out", root / "g_other").returncode == 0
    assert run_cli("partition", "--graph", root / "g", "--parts", 3, "--out", root / "p3").returncode == 0
    return root


def assert_clean_failure(result, *fragments):
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 or lines[-1].startswith("supergcn"), result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def only_expected_entries(root, expected):
    return sorted(p.name for p in root.iterdir()) == sorted(expected)


def test_pipeline_steps_and_summary(workspace):
    result = run_cli("plan", "--graph", workspace / "g", "--partition", workspace / "p3", "--strategy", "hybrid",
                     "--out", workspace / "plan")
    assert result.returncode == 0, result.stderr
    manifest = json.loads((workspace / "plan" / "plan.json").read_text())
    meta = json.loads((workspace / "g" / "meta.json").read_text())
    part = json.loads((workspace / "p3" / "partition.json").read_text())
    assert manifest["graph_hash"] == meta["hash"] == part["graph_hash"]
    assert manifest["partition_hash"] == part["partition_hash"]
    assert sorted(p.name for p in (workspace / "plan").iterdir()) == [
        "pairs.npz", "plan.json", "rank_00000.npz", "rank_00001.npz", "rank_00002.npz", "rank_hashes.npy"]
    # The summary prints every strategy with its total and busiest rank.
    summary = {line.split()[0]: line.split()[1:] for line in result.stdout.splitlines()[2:]}
    assert set(summary) == {"pre", "post", "hybrid"}
    assert int(summary["hybrid"][0].replace(",", "")) == manifest["total_rows_sent"]
    assert int(summary["hybrid"][1].replace(",", "")) == manifest["max_rows_sent_by_rank"]


def test_plan_help_names_the_models_its_model_options_weigh(workspace, tmp_path):
    """The help's "(gat only)" is the models whose PRE and POST rows cost differently, and
    for the others the options change no plan."""
    from supergcn.models import card
    from supergcn.naming import GNN_MODELS
    from supergcn.plan.costs import row_costs

    weighed = [model for model in GNN_MODELS if row_costs(card(model), 3, 16, 4, 7, in_features=8) is not None]
    assert weighed and len(weighed) < len(GNN_MODELS)
    groups = re.findall(r"^the .*\((.*) only\):$", run_cli("plan", "--help").stdout, re.M)
    assert groups == [", ".join(weighed)] * 2
    hashes = {}
    for model in (next(m for m in GNN_MODELS if m not in weighed), weighed[0]):
        for hidden in (16, 64):
            out = tmp_path / f"{model}{hidden}"
            result = run_cli("plan", "--graph", workspace / "g", "--partition", workspace / "p3", "--strategy",
                             "hybrid", "--model", model, "--hidden", hidden, "--out", out)
            assert result.returncode == 0, result.stderr
            hashes[model, hidden] = (json.loads((out / "plan.json").read_text())["cover"],
                                     (out / "rank_hashes.npy").read_bytes())
    alike = [value for (model, _), value in hashes.items() if model not in weighed]
    assert alike[0] == alike[1] and alike[0][0]["pre_row_cost"] == alike[0][0]["post_row_cost"]
    assert hashes[weighed[0], 16][0] != hashes[weighed[0], 64][0]


def test_unknown_dataset(tmp_path):
    assert_clean_failure(run_cli("prepare", "ogbn-nope", "--out", tmp_path / "g"), "unknown dataset 'ogbn-nope'")
    assert only_expected_entries(tmp_path, [])


@pytest.mark.parametrize("parts, message", [(0, "must be at least 1"), (-2, "must be at least 1"),
                                            (2001, "P <= number of nodes")])
def test_bad_part_counts(workspace, tmp_path, parts, message):
    assert_clean_failure(run_cli("partition", "--graph", workspace / "g", "--parts", parts, "--out", tmp_path / "p"),
                         message)
    assert only_expected_entries(tmp_path, [])


def test_plan_from_partition_of_another_graph(workspace, tmp_path):
    result = run_cli("plan", "--graph", workspace / "g_other", "--partition", workspace / "p3", "--strategy", "pre",
                     "--out", tmp_path / "plan")
    assert_clean_failure(result, "different graph", "rerun `supergcn partition`")
    assert only_expected_entries(tmp_path, [])


def test_tampered_partition_is_detected(workspace, tmp_path):
    import shutil
    shutil.copytree(workspace / "p3", tmp_path / "p3")
    parts = np.load(tmp_path / "p3" / "parts.npy")
    np.save(tmp_path / "p3" / "parts.npy", (parts + 1) % 3)
    result = run_cli("plan", "--graph", workspace / "g", "--partition", tmp_path / "p3", "--strategy", "pre",
                     "--out", tmp_path / "plan")
    assert_clean_failure(result, "does not match its manifest")
    assert not (tmp_path / "plan").exists()


@pytest.mark.parametrize("missing", ["graph", "partition", "array"])
def test_missing_inputs(workspace, tmp_path, missing):
    import shutil
    graph = workspace / "g"
    partition = workspace / "p3"
    if missing == "graph":
        graph = tmp_path / "nowhere"
    elif missing == "partition":
        partition = tmp_path / "nowhere"
    else:
        shutil.copytree(graph, tmp_path / "g")
        (tmp_path / "g" / "indices.npy").unlink()
        graph = tmp_path / "g"
    result = run_cli("plan", "--graph", graph, "--partition", partition, "--strategy", "post", "--out",
                     tmp_path / "plan")
    assert_clean_failure(result, {"graph": "nowhere/meta.json not found", "partition": "nowhere/partition.json",
                                  "array": "indices.npy is missing"}[missing])
    assert not (tmp_path / "plan").exists()


def test_bench_kernels_reports_times_and_ratios(workspace, tmp_path):
    out = tmp_path / "bench.json"
    result = run_cli("bench", "kernels", "--graph", workspace / "g", "--features", 8, "--threads", 1, "--repeats", 1,
                     "--json", out)
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    assert report == json.loads(result.stdout)
    assert set(report["seconds"]) == {"ours_forward", "ours_backward", "torch_sparse_mm", "scipy_csr",
                                      "pyg_scatter_mean"}
    assert report["max_abs_error_vs_scipy"] < 1e-5
    bound = report["roofline"]
    gathered, written = report["nnz"] * 8 * 4, report["num_nodes"] * 8 * 4
    assert bound["seconds"] == pytest.approx(gathered / (bound["gather_gb_per_s"] * 1e9)
                                             + written / (bound["write_gb_per_s"] * 1e9))
    assert bound["x_fits_in"] in ("L1", "L2", "L3", "memory")
    assert report["ratios"]["ours_over_roofline"] == pytest.approx(report["seconds"]["ours_forward"]
                                                                   / bound["seconds"])
    assert report["ratios"]["pyg_over_ours"] == pytest.approx(
        report["seconds"]["pyg_scatter_mean"] / report["seconds"]["ours_forward"])
    assert report["compiled_for"]["lanes"] * 32 == report["compiled_for"]["vector_bits"]


def test_bench_kernels_gathers_bfloat16_rows_against_their_own_bytes(workspace):
    result = run_cli("bench", "kernels", "--graph", workspace / "g", "--features", 8, "--repeats", 1,
                     "--rows", "bfloat16")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["rows"] == "bfloat16"
    assert set(report["seconds"]) == {"ours_forward", "ours_backward"}  # the libraries gather float32 only
    assert report["max_abs_error_vs_scipy"] < 1e-5  # against scipy on the rows' float32 values
    bound = report["roofline"]
    gathered, written = report["nnz"] * 8 * 2, report["num_nodes"] * 8 * 4  # bf16 rows in, float32 sums out
    assert bound["x_bytes"] == report["num_nodes"] * 8 * 2
    assert bound["pure_gather_seconds"] == pytest.approx(gathered / (bound["gather_gb_per_s"] * 1e9))
    assert bound["seconds"] == pytest.approx(gathered / (bound["gather_gb_per_s"] * 1e9)
                                             + written / (bound["write_gb_per_s"] * 1e9))


def test_bench_kernels_refuses_bfloat16_rows_beside_the_authors_kernel(tmp_path):
    result = run_cli("bench", "kernels", "--shape", "synthetic-small", "--rows", "bfloat16", "--authors-ops", tmp_path)
    assert_clean_failure(result, "float32 rows only")


def test_bench_kernels_refuses_an_authors_folder_without_their_module(tmp_path):
    result = run_cli("bench", "kernels", "--shape", "synthetic-small", "--features", 8, "--authors-ops", tmp_path)
    assert_clean_failure(result, "no supergnn_ops")


def test_bench_quantization_reports_rates_against_memcpy():
    result = run_cli("bench", "quantization", "--rows", 1000, "--features", 16, "--repeats", 1, "--bits", 2)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["float32_bytes"] == 1000 * 16 * 4
    # 8 destinations of 125 rows; each chunk is padded to 128 rows = 32 packed byte rows.
    assert report["packed_bytes"] == 8 * 32 * 16
    for step in ("quantize_pack", "unpack_dequantize"):
        rate = report["float32_bytes"] / report["seconds"][step] / 1e9
        assert report["gb_per_s"][step] == pytest.approx(rate)
        assert report["fraction_of_memcpy"][step] == pytest.approx(rate / report["memcpy_gb_per_s"])


def test_volume_tabulates_rows_per_strategy(workspace, tmp_path):
    for strategy in ("pre", "hybrid"):
        assert run_cli("plan", "--graph", workspace / "g", "--partition", workspace / "p3", "--strategy", strategy,
                       "--out", tmp_path / strategy).returncode == 0
    result = run_cli("volume", tmp_path / "pre", tmp_path / "hybrid", "--csv", tmp_path / "rows.csv")
    assert result.returncode == 0, result.stderr
    import pandas as pd
    table = pd.read_csv(tmp_path / "rows.csv").set_index("strategy")
    hybrid = json.loads((tmp_path / "hybrid" / "plan.json").read_text())
    assert table.loc["hybrid", "rows_sent"] == hybrid["total_rows_sent"]
    assert table.loc["pre", "rows_sent"] == table.loc["hybrid", "rows_pre"] == hybrid["rows_if_pre"]
    assert table.loc["hybrid", "reduction_vs_best_single"] == pytest.approx(
        min(hybrid["rows_if_pre"], hybrid["rows_if_post"]) / hybrid["total_rows_sent"])


def test_every_command_is_listed_in_pipeline_order_and_reachable():
    from supergcn.cli import GROUP_HELP, ORDER, build_parser, command_names, command_words

    names = command_names()
    words = [command_words(name) for name in names]
    assert {w[0] for w in words} == set(ORDER)
    assert [w[0] for w in words] == sorted((w[0] for w in words), key=ORDER.index)
    assert {w[0] for w in words if len(w) == 2} == set(GROUP_HELP)
    assert ("bench", "comm") in words and ("perf", "predict") in words and ("train",) in words
    help_text = build_parser().format_help()
    assert all(first in help_text for first in ORDER)


def test_a_command_loads_its_own_module_only():
    import subprocess
    import sys

    def loaded(words):
        probe = (f"import sys\nfrom supergcn.cli import build_parser\nbuild_parser({words!r})\n"
                 "print(*sorted(m for m in sys.modules if m.startswith('supergcn.cli.')))")
        result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return result.stdout.split()

    assert loaded(["plan", "--graph"]) == ["supergcn.cli._args", "supergcn.cli.plan"]
    assert loaded(["perf", "predict"]) == ["supergcn.cli._args", "supergcn.cli.perf_predict"]
    assert "supergcn.cli.bench_comm" in loaded(["bench", "--help"])


def test_errors_name_the_command(workspace, tmp_path):
    result = run_cli("plan", "--graph", workspace / "g", "--partition", tmp_path / "missing", "--strategy", "pre",
                     "--out", tmp_path / "plan")
    assert result.returncode == 2
    assert result.stderr.startswith("supergcn plan: error: partition manifest")


def test_the_old_model_command_names_its_new_name():
    result = run_cli("model", "predict", "--graph", "g")
    assert result.returncode == 2
    assert result.stderr.strip() == ("supergcn: error: `supergcn model` is now `supergcn perf` — run "
                                     "`supergcn perf predict --graph g`")


def test_ctrl_c_is_one_line_and_leaves_nothing(tmp_path):
    """SIGINT while the products shape is sampled (minutes): one error line, status 130, no
    graph and no staging folder left."""
    import signal
    import subprocess
    import sys
    import time

    from supergcn.errors import INTERRUPTED

    out = tmp_path / "graph"
    # As from a terminal: a suite started in the background by a shell inherits SIGINT
    # ignored, and Python then never turns it into KeyboardInterrupt.
    started = subprocess.Popen([sys.executable, "-m", "supergcn.cli", "prepare", "synthetic-products", "--out", out],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(8)  # the imports, then well inside the sampling
    assert started.poll() is None, "the step ended before it could be interrupted"
    started.send_signal(signal.SIGINT)
    _, stderr = started.communicate(timeout=60)
    assert started.returncode == INTERRUPTED, stderr
    # Before it, the progress line says where the step was.
    assert "Traceback" not in stderr and [line for line in stderr.splitlines() if "error:" in line] == [
        "supergcn prepare: error: interrupted (Ctrl-C); its outputs are written whole or not at all: run it again "
        "to redo what it left"], stderr
    assert list(tmp_path.iterdir()) == []
