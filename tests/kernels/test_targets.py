"""The kernels compiled for each LLVM CPU target this host can execute give the same bits:
the gather and its transpose the float32 sum in entry order, of float32 rows and of
bfloat16 rows (widths 1 to 300, weighted and not, 1 and 2 threads), the attention and
activation kernels and the widening sum the same outputs and gradients as compiled for the generic x86-64 /
AArch64 CPU (the baseline instruction set: on x86 no vector wider than SSE and no FMA).
A target whose code the host cannot run is skipped with its reason, and so is ``host``
where it is, or LLVM compiles it as, one of the named targets
(:func:`supergcn.testing.targets.host_twin`): each
compilation of every kernel takes about a minute of one core."""

from concurrent.futures import ThreadPoolExecutor

import llvmlite.binding as llvm
import pytest

from supergcn.testing.targets import SAME_CODE_AS, TARGETS, TargetNotExecutable, host_targets, host_twin, run_on_target


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """Each named target's report, or why it is not run here, compiled two at a time (each
    child compiles on one core) into a Numba cache of its own; and ``host``'s where it is
    none of them."""
    cache = tmp_path_factory.mktemp("numba-targets")

    def report(target: str) -> dict | str:
        try:
            return run_on_target(target, cache / target)
        except TargetNotExecutable as reason:
            return str(reason)
    with ThreadPoolExecutor(max_workers=2) as pool:
        found = dict(zip(host_targets(), pool.map(report, host_targets())))
    twin = host_twin(host_targets())
    if twin is not None and isinstance(found[twin], dict):
        found["host"] = (f"host is {llvm.get_host_cpu_name()}, which LLVM compiles as {twin}: the {twin} case "
                         "compiled the kernels for it and ran them")
    else:
        found["host"] = report("host")
    return found


@pytest.mark.parametrize("target", [*host_targets(), "host"])
def test_every_target_gives_the_same_bits(target, reports):
    generic, report = reports["generic"], reports[target]
    if isinstance(report, str):
        pytest.skip(report)
    assert report["gather_mismatches"] == [], f"{target}: " + "; ".join(report["gather_mismatches"][:5])
    assert report["digests"].keys() == generic["digests"].keys()
    differ = [case for case, digest in generic["digests"].items() if report["digests"][case] != digest]
    assert not differ, f"{report['target']} differs from generic in {differ}"


@pytest.mark.parametrize(("host", "twin"), [("znver4", "znver4"), ("emeraldrapids", "sapphirerapids"),
                                            ("icelake-server", None)])
def test_host_twin_is_the_named_target_llvm_compiles_the_host_as(monkeypatch, host, twin):
    monkeypatch.setattr(llvm, "get_host_cpu_name", lambda: host)
    assert host_twin(TARGETS["x86_64"]) == twin


def test_every_alias_names_a_target_of_the_matrix():
    """An alias to a CPU the matrix does not compile would save nothing."""
    assert set(SAME_CODE_AS.values()) <= {name for names in TARGETS.values() for name in names}
