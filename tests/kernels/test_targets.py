"""The kernels compiled for each LLVM CPU target this host can execute give the same bits:
the gather and its transpose the float32 sum in entry order (widths 1 to 300, weighted and
not, 1 and 2 threads), the attention and activation kernels the same outputs and gradients
as compiled for the generic x86-64 / AArch64 CPU (the baseline instruction set: on x86 no
vector wider than SSE and no FMA).
A target whose code the host cannot run is skipped with its reason."""

import pytest

from supergcn.testing.targets import TargetNotExecutable, host_targets, run_on_target


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("numba-targets")


@pytest.fixture(scope="module")
def generic(cache):
    return run_on_target("generic", cache / "generic")


@pytest.mark.parametrize("target", ["host", *host_targets()])
def test_every_target_gives_the_same_bits(target, generic, cache):
    try:
        report = generic if target == "generic" else run_on_target(target, cache / target)
    except TargetNotExecutable as reason:
        pytest.skip(str(reason))
    assert report["gather_mismatches"] == [], f"{target}: " + "; ".join(report["gather_mismatches"][:5])
    assert report["digests"].keys() == generic["digests"].keys()
    differ = [case for case, digest in generic["digests"].items() if report["digests"][case] != digest]
    assert not differ, f"{report['target']} differs from generic in {differ}"
