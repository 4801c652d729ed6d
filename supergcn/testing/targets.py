"""The kernels compiled for other CPUs than this one: do their results keep their bits?

LLVM picks instructions, unrolling and vector widths per CPU target, and with fast-math
flags it may also reorder a sum or fuse a multiply into an add, which changes the last
bits of a result from one CPU to the next. The kernels carry no such flag where they sum
(:mod:`supergcn.kernels.gather`, :mod:`supergcn.kernels.attention`,
:mod:`supergcn.kernels.activation`, :mod:`supergcn.kernels.widening`,
:mod:`supergcn.kernels.rounding`, :mod:`supergcn.kernels.row_scaled`), so every target
must give the same bits. This module
checks that: :func:`run_on_target` runs ``python -m supergcn.testing.targets`` in a child
process whose Numba compiles for one named LLVM CPU (``NUMBA_CPU_NAME``, with that CPU's
own features: ``NUMBA_CPU_FEATURES`` empty), into a cache of its own; the child runs every
kernel on fixed inputs at 1 and 2 threads, weighted and not, and reports

* for the gather and its transpose, of float32 rows and of bfloat16 rows (summed as
  their float32 values), the cases whose result differs from the float32 sum in each
  row's entry order, a separate multiply and add per entry (:func:`entry_order_sum`),
  widths 1 to :data:`MAX_WIDTH`;
* for the attention, activation, widening-sum, scaled-rounding and GCN's row-scaled
  kernels, a digest of every output, which the caller compares across targets.

A target the host cannot execute dies of SIGILL: :func:`run_on_target` says so instead
of failing. From a shell, ``python -m supergcn.testing.targets --target znver4`` prints
the report of one target, and ``tests/kernels/test_targets.py`` runs the whole matrix.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np

#: LLVM CPU names per machine architecture: the baseline (no FMA, the narrowest vectors),
#: AVX2 with FMA, the first and current AVX-512 Xeons and AMD's AVX-512 core on x86;
#: Neoverse N1 (NEON), the A64FX and Neoverse V1 (SVE) on Arm. Each costs a compilation of
#: every kernel (about 25 s), so the list keeps one target per way LLVM has been seen to
#: compile the sums differently, not every CPU it knows.
TARGETS = {
    "x86_64": ("generic", "x86-64-v3", "skylake-avx512", "sapphirerapids", "znver4"),
    "aarch64": ("generic", "neoverse-n1", "a64fx", "neoverse-v1"),
}
#: LLVM CPU names that LLVM compiles exactly as another: the same features and the same
#: tuning model (LLVM's X86.td defines Emerald Rapids with Sapphire Rapids' features and
#: tuning; the kernels' assembly for the two was seen identical but for symbol addresses).
SAME_CODE_AS = {"emeraldrapids": "sapphirerapids"}
#: The widest row the gather is checked at (every width from 1).
MAX_WIDTH = 300
#: Threads each kernel runs with.
THREADS = (1, 2)


def host_targets() -> tuple[str, ...]:
    """The LLVM CPUs of :data:`TARGETS` for this machine's architecture (``generic`` alone
    on another)."""
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine().lower())
    return TARGETS.get(machine, ("generic",))


def host_twin(targets) -> str | None:
    """The target of ``targets`` that compiling for ``host`` would duplicate: the one LLVM
    names this machine's CPU (what Numba compiles for by default), or the one LLVM compiles
    that CPU as (:data:`SAME_CODE_AS`), else None.

    Numba compiles ``host`` for that CPU's name with the features the host reports, the
    named target for the same name with the features LLVM gives that CPU: the same
    scheduling model and tuning. The features differ only where the host lacks one LLVM
    gives the CPU (masked by a hypervisor or the OS: the named target's code using it dies
    of SIGILL here) or reports one LLVM does not list for it (system instructions, which no
    kernel emits). So where the named target's code runs here, ``host`` would compile the
    same kernels a second time.

    Args:
        targets: LLVM CPU names.

    Returns:
        The name of this CPU, or of the CPU LLVM compiles it as, if it is among
        ``targets``; else None.
    """
    import llvmlite.binding as llvm

    name = llvm.get_host_cpu_name()
    name = SAME_CODE_AS.get(name, name)
    return name if name in targets else None


class TargetNotExecutable(Exception):
    """The host's CPU lacks an instruction that code compiled for the target uses."""


def run_on_target(target: str, cache_dir: Path, max_width: int = MAX_WIDTH, timeout: float = 600) -> dict:
    """The report of :func:`check_kernels` from a child process compiling for ``target``.

    Args:
        target: an LLVM CPU name (``generic``, ``znver4``, ``sapphirerapids``...), or
            ``host`` for what Numba picks here by default (this CPU and its features).
        cache_dir: the Numba cache of this target's compilations (reused by later calls).
        max_width: the widest row checked.
        timeout: seconds the child may take.

    Returns:
        The child's report (:func:`check_kernels`).

    Raises:
        TargetNotExecutable: the child died of SIGILL.
        RuntimeError: the child failed otherwise, with its error output.
    """
    env = {key: value for key, value in os.environ.items() if key not in ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES")}
    env.update(NUMBA_CACHE_DIR=str(cache_dir), NUMBA_NUM_THREADS=str(max(THREADS)))
    if target != "host":  # the CPU's own features, not the host's (Numba's default beside a CPU name)
        env.update(NUMBA_CPU_NAME=target, NUMBA_CPU_FEATURES="")
    result = subprocess.run([sys.executable, "-m", "supergcn.testing.targets", "--max-width", str(max_width)],
                            env=env, capture_output=True, text=True, timeout=timeout)
    if result.returncode == -signal.SIGILL:
        raise TargetNotExecutable(f"this CPU cannot execute code built for {target} (SIGILL)")
    if result.returncode != 0:
        raise RuntimeError(f"the kernels compiled for {target} failed:\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.splitlines()[-1])


def entry_order_sum(indptr: np.ndarray, indices: np.ndarray, weights: np.ndarray | None, x: np.ndarray) -> np.ndarray:
    """``out[r] = ((0 + w_1 x[c_1]) + w_2 x[c_2]) + ...`` over row r's entries in CSR order,
    every product and sum rounded to ``x``'s dtype (numpy: no fused multiply-add).

    Args:
        indptr: CSR row pointers.
        indices: CSR column indices.
        weights: one weight per entry, or None for 1 (no multiplication).
        x: the dense input.

    Returns:
        The rows x F result.
    """
    degrees = np.diff(indptr)
    out = np.zeros((len(degrees), x.shape[1]), x.dtype)
    for position in range(int(degrees.max(initial=0))):  # the j-th entry of every row that has one
        rows = np.flatnonzero(degrees > position)
        entries = indptr[rows] + position
        terms = x[indices[entries]]
        if weights is not None:
            terms = weights[entries, None].astype(x.dtype) * terms
        out[rows] = out[rows] + terms
    return out


def _digest(*arrays) -> str:
    digest = hashlib.blake2b(digest_size=12)
    for array in arrays:
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def _csr_case(rng, rows: int = 120, cols: int = 90):
    """A random CSR with empty rows and a hub row of every column, weights in [0.5, 2)."""
    import scipy.sparse as sp

    m = sp.random(rows, cols, density=0.05, random_state=rng, format="lil", dtype=np.float32)
    m[7, :] = 1.0
    m[10:20, :] = 0.0
    m = sp.csr_matrix(m)
    m.data = rng.uniform(0.5, 2.0, m.nnz).astype(np.float32)
    return m


def _gather_mismatches(max_width: int) -> list[str]:
    import torch

    from supergcn.kernels.bfloat16 import kernel_array
    from supergcn.kernels.gather import GatherCsr

    rng = np.random.default_rng(0)
    m = _csr_case(rng)
    failures = []
    for weighted in (False, True):
        forward = GatherCsr(m.indptr, m.indices, m.shape[1], m.data if weighted else None)
        for name, op in (("gather", forward), ("transpose", forward.transpose())):
            x_all = rng.standard_normal((op.shape[1], max_width)).astype(np.float32)
            # bfloat16 rows (their bit patterns), summed as their float32 values are
            bf16_all = torch.from_numpy(x_all).to(torch.bfloat16)
            for width in range(1, max_width + 1):
                x = np.ascontiguousarray(x_all[:, :width])
                bf16 = bf16_all[:, :width].contiguous()
                for rows, values, kind in ((x, x, "float32"),
                                           (kernel_array(bf16), bf16.float().numpy(),
                                            "bfloat16")):
                    expected = entry_order_sum(op.indptr, op.indices, op.weights if weighted else None, values)
                    got = op.matmul(rows)
                    if not np.array_equal(got, expected):
                        differ = np.count_nonzero(got != expected)
                        failures.append(f"{name} {kind} rows weighted={weighted} F={width}: {differ} of {got.size} "
                                        f"values differ, by up to {np.max(np.abs(got - expected)):.3g}")
    return failures


def _attention_digests() -> dict[str, str]:
    import torch

    from supergcn.kernels.attention import AttentionCsr, FusedAttention

    rng = np.random.default_rng(1)
    digests = {}
    rows, sources, heads = 60, 80, 3
    for width in (5, 16, 37, 64):
        for normalise in (True, False):
            entries = 400
            entry_rows = np.concatenate([rng.integers(0, rows, entries), np.arange(rows)])
            entry_sources = np.concatenate([rng.integers(0, sources, entries), np.arange(rows)])
            pieces = rng.integers(0, rows, 30) if normalise else np.empty(0, np.int64)
            csr = AttentionCsr(entry_rows, entry_sources, rows, sources, pieces if normalise else None)

            def tensor(*shape):
                return torch.tensor(rng.standard_normal(shape), dtype=torch.float32, requires_grad=True)
            inputs = (tensor(sources, heads, width), tensor(sources, heads), tensor(rows, heads),
                      tensor(len(pieces), heads, width),
                      torch.tensor(rng.uniform(0.5, 2, (len(pieces), heads)), dtype=torch.float32,
                                   requires_grad=True),
                      torch.tensor(rng.standard_normal((len(pieces), heads)), dtype=torch.float32))
            upstream = torch.tensor(rng.standard_normal((rows, heads, width)), dtype=torch.float32)
            out, _, sums = FusedAttention.apply(*inputs, csr, 0.2, normalise)
            grads = torch.autograd.grad((out, sums), inputs[:5], (upstream, torch.ones_like(sums)),
                                        allow_unused=True)
            digests[f"attention F={width} normalise={normalise}"] = _digest(
                out.detach().numpy(), sums.detach().numpy(), *(g.numpy() for g in grads if g is not None))
    return digests


def _activation_digests() -> dict[str, str]:
    import torch

    from supergcn.kernels.activation import dropout_norm_relu

    digests = {}
    for width in (7, 37, 256):
        for p, affine in ((0.0, True), (0.5, True), (0.5, False)):
            torch.manual_seed(width)
            x = torch.randn(3000, width, requires_grad=True)
            norm = torch.nn.LayerNorm(width, elementwise_affine=affine)
            if affine:
                torch.nn.init.uniform_(norm.weight, 0.5, 1.5)
                torch.nn.init.uniform_(norm.bias, -0.5, 0.5)
            for bfloat16 in (False, True):
                out = dropout_norm_relu(x, norm, p, training=True, seed=99, bfloat16=bfloat16)
                leaves = [x] + ([norm.weight, norm.bias] if affine else [])
                grads = torch.autograd.grad(out, leaves, torch.randn(out.shape).to(out.dtype))
                digests[f"activation F={width} p={p} affine={affine} bfloat16={bfloat16}"] = _digest(
                    out.detach().view(torch.int16 if bfloat16 else torch.int32).numpy(), *(g.numpy() for g in grads))
            # A bfloat16 GEMM's product with its bias still to add (a hidden GraphSAGE layer's).
            product, shift = (x.detach() * 3).bfloat16().requires_grad_(), torch.randn(width, requires_grad=True)
            out = dropout_norm_relu(product, norm, p, training=True, seed=99, bfloat16=True, row_bias=shift)
            leaves = [product, shift] + ([norm.weight, norm.bias] if affine else [])
            grads = torch.autograd.grad(out, leaves, torch.randn(out.shape).to(out.dtype))
            digests[f"activation F={width} p={p} affine={affine} biased bfloat16 product"] = _digest(
                out.detach().view(torch.int16).numpy(), grads[0].view(torch.int16).numpy(),
                *(g.numpy() for g in grads[1:]))
    return digests


def _widening_digests() -> dict[str, str]:
    import torch

    from supergcn.kernels.widening import widening_add

    digests = {}
    for width in (7, 256):
        torch.manual_seed(width)
        a, b = torch.randn(3000, width) * 1e3, torch.randn(3000, width).bfloat16()
        digests[f"widening F={width}"] = _digest(widening_add(a, b).numpy(), widening_add(a.bfloat16(), b).numpy(),
                                                 widening_add(b, a[0]).numpy())  # a bias row
    return digests


def _rounding_digests() -> dict[str, str]:
    import torch

    from supergcn.kernels.rounding import scaled_rounded
    from supergcn.kernels.row_scaled import scaled_rows, self_loops_added

    digests = {}
    for width in (7, 256):
        torch.manual_seed(width)
        rows, scale = torch.randn(3000, width) * 1e3, torch.rand(3000)
        digests[f"scaled rounding F={width}"] = _digest(*(scaled_rounded(r, s).view(torch.int16).numpy()
                                                          for r in (rows, rows.bfloat16()) for s in (scale, None)))
        x, missing = rows.bfloat16().requires_grad_(), (torch.rand(3000) < 0.5).float()
        aggregated = torch.randn(3000, width, requires_grad=True)
        scaled, looped = scaled_rows(x, scale), self_loops_added(aggregated, x, missing, scale)
        grads = torch.autograd.grad((scaled, looped), (aggregated, x),
                                    (torch.randn_like(scaled), torch.randn_like(looped)))
        digests[f"row scaled F={width}"] = _digest(scaled.detach().view(torch.int16).numpy(), looped.detach().numpy(),
                                                   grads[0].numpy(), grads[1].view(torch.int16).numpy())
    return digests


def check_kernels(max_width: int = MAX_WIDTH) -> dict:
    """Run every kernel at each of :data:`THREADS` in this process, as compiled here.

    Args:
        max_width: the widest row the gather is checked at.

    Returns:
        ``{"target": ..., "gather_mismatches": [...], "digests": {case: digest}}``, the
        digests keyed by kernel, case and thread count.
    """
    import llvmlite.binding as llvm

    from supergcn.kernels.jit import numba

    report = {"target": numba.config.CPU_NAME or llvm.get_host_cpu_name(), "gather_mismatches": [], "digests": {}}
    for threads in THREADS:
        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        report["gather_mismatches"] += [f"{threads} threads: {line}" for line in _gather_mismatches(max_width)]
        for case, digest in {**_attention_digests(), **_activation_digests(), **_widening_digests(),
                             **_rounding_digests()}.items():
            report["digests"][f"{case} threads={threads}"] = digest
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", help="compile for this LLVM CPU in a child process (default: here, as set up)")
    parser.add_argument("--max-width", type=int, default=MAX_WIDTH)
    args = parser.parse_args()
    if args.target:
        import tempfile

        with tempfile.TemporaryDirectory() as cache:
            report = run_on_target(args.target, Path(cache), args.max_width)
    else:
        report = check_kernels(args.max_width)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
