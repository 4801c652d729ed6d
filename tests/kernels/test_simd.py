"""What the kernels ask of the compiler: vector widths per CPU, and the code LLVM emits
for the kernels' blocks on x86 with AVX-512 and on the A64FX (cross-compiled here)."""

import re

import llvmlite.binding as llvm
import pytest
from llvmlite import ir
from numba import types
from numba.core.registry import cpu_target

from supergcn.kernels.simd import _Block as Block
from supergcn.kernels.simd import (
    block_accumulate,
    block_fill,
    block_store,
    compiled_for,
    cpu_model,
    host_features,
    kernel_target,
    vector_attributes,
    vector_lanes,
    widest_vectors,
)


@pytest.mark.parametrize("features, sve_bits, lanes", [
    ({"avx512f", "avx2", "avx"}, None, 16),
    ({"avx2", "avx", "fma"}, None, 8),
    ({"sse4.2"}, None, 4),
    ({"neon"}, None, 4),
    ({"neon", "sve"}, 512, 16),      # A64FX
    ({"neon", "sve"}, 256, 8),       # a 256-bit SVE core (Graviton 3)
    ({"neon", "sve"}, None, 4),      # SVE of unknown length: fixed-length vectors stay NEON
])
def test_vector_lanes(features, sve_bits, lanes):
    assert vector_lanes(features, sve_bits) == lanes


def test_vector_attributes_fix_the_sve_length_only_where_known():
    assert vector_attributes(512)[-1] == "vscale_range(4,4)"
    assert not any("vscale" in a for a in vector_attributes(0))


@pytest.mark.parametrize("assembly, isa, bits", [
    ("vaddps (%rax), %zmm1, %zmm1", "x86 AVX-512", 512),
    ("vaddps %ymm0, %ymm1, %ymm1\n\tvmovss %xmm0, (%rax)", "x86 AVX", 256),
    ("ld1w { z0.s }, p0/z, [x0]\n\tfadd v0.4s, v0.4s, v1.4s", "AArch64 SVE", None),
    ("fadd v0.4s, v0.4s, v1.4s", "AArch64 NEON", 128),
    ("addq %rax, %rbx", "scalar", None),
])
def test_widest_vectors_read_from_assembly(assembly, isa, bits):
    assert widest_vectors(assembly) == {"isa": isa, "bits": bits}


def test_cpu_model_names_the_processor(tmp_path):
    intel = tmp_path / "intel"
    intel.write_text("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8592+\n"
                     "flags\t\t: fpu avx512f\n\nprocessor\t: 1\nmodel name\t: Intel(R) Xeon(R) Platinum 8592+\n")
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd sve\nCPU implementer\t: 0x46\nCPU part\t: 0x001\n")
    assert cpu_model(str(intel)) == "Intel(R) Xeon(R) Platinum 8592+"
    assert cpu_model(str(arm)) == "implementer 0x46 part 0x001"
    assert cpu_model(str(tmp_path / "missing")) and kernel_target()["cpu_model"] == cpu_model()


def test_this_host_compiles_the_vectors_it_reports():
    target = kernel_target()
    report = compiled_for()
    assert report["lanes"] == vector_lanes() == target["lanes"]
    if "avx512f" in host_features():
        assert report["emitted"] == {"isa": "x86 AVX-512", "bits": 512}
    assert report["register_block"] == 8 * report["lanes"]


def block_assembly(triple: str, cpu: str, features: str, sve_bits: int | None, width: int, lanes: int) -> str:
    """Machine code of the kernels' block operations (fill from a row, accumulate a row,
    store) on ``width`` float32 columns with a masked last vector, for another target."""
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    module = ir.Module(name="block")
    module.triple = triple
    floats = ir.FloatType().as_pointer()
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [floats, floats, floats, ir.IntType(64)]), "block")
    for attribute in vector_attributes(sve_bits or 0):
        set.add(function.attributes, attribute)
    builder = ir.IRBuilder(function.append_basic_block())
    context = cpu_target.target_context
    buffer = builder.alloca(ir.FloatType(), size=width)
    block = Block(context, builder, types.float32, width, lanes, True, function.args[3])
    block.unit_weight = True
    one = ir.Constant(ir.FloatType(), 1.0)
    block_fill.generate(block, buffer, function.args[0], one)
    block_accumulate.generate(block, buffer, function.args[1], one)
    block_store.generate(block, buffer, function.args[2], one)
    builder.ret_void()
    parsed = llvm.parse_assembly(str(module))
    parsed.verify()
    machine = llvm.Target.from_triple(triple).create_target_machine(cpu=cpu, features=features, opt=3)
    passes = llvm.create_pass_builder(machine, llvm.create_pipeline_tuning_options(speed_level=3))
    passes.getModulePassManager().run(parsed, passes)
    return machine.emit_assembly(parsed)


def test_the_a64fx_gets_sve_registers_and_predicated_corners():
    """With the attributes the kernels carry on a 512-bit SVE host, LLVM writes a block of
    48 columns as three SVE vectors, predicated loads and stores for the corner; without
    the length the same block takes twelve 128-bit NEON adds."""
    sve = block_assembly("aarch64-unknown-linux-gnu", "a64fx", "", 512, width=48, lanes=16)
    assert len(re.findall(r"fadd\s+z\d+\.s", sve)) == 3 and not re.search(r"fadd\s+v\d+", sve)
    assert re.search(r"ld1w\s+\{ z\d+\.s \}, p\d/z", sve) and "st1w" in sve
    neon = block_assembly("aarch64-unknown-linux-gnu", "a64fx", "", None, width=48, lanes=4)
    assert len(re.findall(r"fadd\s+v\d+\.4s", neon)) >= 11


def test_an_avx512_core_gets_zmm_registers_and_masked_corners():
    code = block_assembly("x86_64-unknown-linux-gnu", "sapphirerapids", "", None, width=48, lanes=16)
    assert widest_vectors(code) == {"isa": "x86 AVX-512", "bits": 512}
    assert "{%k" in code, "the last vector is read and written under a mask register"
