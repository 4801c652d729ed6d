"""What the aggregation kernels ask of the compiler, and what it gave them.

Numba exposes neither register blocking, explicit vectors nor prefetching, so a few small
intrinsics emit the LLVM the kernels need (each a few lines of IR, typed by Numba like any
function):

* :func:`stack_buffer` — a fixed-size array in the stack frame: the accumulators of a
  1 × N micro-kernel (SuperGCN §4). Accessed only as whole vectors at constant offsets
  (below), LLVM promotes it to vector registers, which a heap array or the output row
  cannot be: LLVM cannot prove that the output does not alias the input it gathers.
* :func:`block_fill`, :func:`block_accumulate`, :func:`block_store` — the 1 × N block as
  explicit vectors: N / lanes vector loads, adds (or multiplies, then adds: no fast-math
  flag, so LLVM neither fuses nor reorders them on any CPU) and stores written out.
  The last vector of a block whose width is not a multiple of the vector's is read and
  written with ``llvm.masked.load`` and ``llvm.masked.store`` (the paper's corner
  kernels, which use AVX-512 masks and SVE predicates the same way): lanes past the row
  are neither read nor written, so a row of 40 features is one pass of three vectors,
  not a vector pass and a scalar tail.
* :func:`prefetch` — ``llvm.prefetch`` (read, keep in all levels) of one address, to
  have the rows of neighbours a few entries ahead in flight while this one is summed.
* :func:`prefer_wide_vectors` — the function attributes of :func:`vector_attributes`:
  ``prefer-vector-width`` and ``min-legal-vector-width`` of 512 bits, without which
  LLVM's tuning of every AVX-512 Intel core since Skylake-SP splits 512-bit vectors into
  two 256-bit halves (the clock penalty of early AVX-512), and on a CPU with SVE of a
  known length (the A64FX's 512 bits) ``vscale_range``, without which LLVM lowers
  fixed-length vectors to 128-bit NEON and masked loads to scalar code.

:func:`vector_lanes` sizes the vectors (16 float32 with AVX-512 or 512-bit SVE, 8 with
AVX, 4 otherwise) and with it the register block: eight vectors of accumulators, a
quarter of AVX-512's or SVE's 32 registers, half of AVX2's 16. :func:`kernel_target`
says what the kernels were built for (CPU, vector features, SVE length, vector width),
cheaply, for every run's metrics; :func:`compiled_for` also compiles a probe and reads
its machine code, so that ``supergcn bench kernels`` shows what was emitted — on a
Fugaku node, whether the A64FX ran SVE or NEON code.
"""

from __future__ import annotations

import ctypes
import functools
import platform
import re
from pathlib import Path

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from supergcn.kernels.jit import numba

#: Vector registers of accumulators in one micro-kernel (a 1 x N block of N = this x lanes).
ACCUMULATOR_VECTORS = 8
#: Bytes a :func:`stack_buffer` is aligned to: the widest vector read from one (16 float64).
STACK_ALIGNMENT = 128


@intrinsic
def stack_buffer(typingctx, length, like):
    """A pointer to ``length`` (a compile-time constant) uninitialised elements of the
    dtype of the array ``like``, in the calling function's stack frame; view it with
    ``numba.carray(pointer, length)``."""
    if not isinstance(length, types.IntegerLiteral):
        return None  # Numba retries with the literal value
    count = length.literal_value

    def codegen(context, builder, signature, args):
        buffer = cgutils.alloca_once(builder, context.get_value_type(like.dtype), size=count)
        # Read and written as whole vectors, whose loads and stores assume their own
        # alignment (up to 128 bytes: 16 float64), not the element's.
        buffer.align = STACK_ALIGNMENT
        return buffer
    return types.CPointer(like.dtype)(length, like), codegen


@intrinsic
def prefetch(typingctx, array, row, column):
    """Hint the cache to fetch ``array[row, column]`` (a 2-D array): no load, no fault
    for an address outside it, no effect on the result."""
    def codegen(context, builder, signature, args):
        array_type = signature.args[0]
        view = context.make_array(array_type)(context, builder, args[0])
        address = cgutils.get_item_pointer(context, builder, array_type, view, [args[1], args[2]], wraparound=False)
        byte_pointer, int32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        function = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [byte_pointer, int32, int32, int32]), "llvm.prefetch.p0")
        # read (0), keep in every level (3), data cache (1)
        builder.call(function, [builder.bitcast(address, byte_pointer), int32(0), int32(3), int32(1)])
        return context.get_dummy_value()
    return types.none(array, row, column), codegen


@intrinsic
def prefer_wide_vectors(typingctx):
    """Give the calling function the attributes of :func:`vector_attributes`."""
    def codegen(context, builder, signature, args):
        attributes = builder.function.attributes
        # llvmlite's attribute set accepts only the keyword attributes it knows; LLVM's IR
        # takes these in the same place.
        for attribute in vector_attributes():
            set.add(attributes, attribute)
        return context.get_dummy_value()
    return types.none(), codegen


def _splat(builder, value, lanes: int):
    """``<value, value, ..., value>``."""
    int32 = ir.IntType(32)
    vector = ir.VectorType(value.type, lanes)
    single = builder.insert_element(ir.Constant(vector, ir.Undefined), value, int32(0))
    return builder.shuffle_vector(single, ir.Constant(vector, ir.Undefined), ir.Constant(ir.VectorType(int32, lanes),
                                                                                        [0] * lanes))


def _lanes_below(builder, lanes: int, count):
    """The mask ``<0 < count, 1 < count, ..., lanes - 1 < count>``."""
    int32 = ir.IntType(32)
    return builder.icmp_unsigned("<", ir.Constant(ir.VectorType(int32, lanes), list(range(lanes))),
                                 _splat(builder, builder.trunc(count, int32), lanes))


#: The array dtype whose elements are bfloat16 bit patterns (numpy has no bfloat16):
#: a block reads them as the float32 of the same upper 16 bits, exactly.
BFLOAT16_BITS = types.uint16


def accumulator_dtype(dtype):
    """The Numba type a block of ``dtype`` elements accumulates in: float32 for bfloat16
    bit patterns (:data:`BFLOAT16_BITS`), the element's own type otherwise."""
    return types.float32 if dtype == BFLOAT16_BITS else dtype


class _Block:
    """The code generation shared by the three block intrinsics: a 1 x ``width`` block of
    accumulators in a stack buffer, ``width // lanes`` vectors of ``lanes`` elements, the
    last one masked to its first ``count`` lanes when ``masked``. The array rows a block
    reads hold ``element_type`` (float32, float64, or bfloat16 bit patterns, which a load
    widens to float32: the bits shifted into the upper half, exactly as bfloat16 is
    defined, so a bfloat16 row is summed as its float32 values would be)."""

    def __init__(self, context, builder, element_type, width: int, lanes: int, masked: bool, count) -> None:
        self.builder = builder
        self.widens = element_type == BFLOAT16_BITS
        self.element = context.get_value_type(accumulator_dtype(element_type))
        self.stored = context.get_value_type(element_type)
        self.alignment = ir.IntType(32)(element_type.bitwidth // 8)
        self.lanes = lanes
        self.vector = ir.VectorType(self.element, lanes)
        self.stored_vector = ir.VectorType(self.stored, lanes)
        self.vectors = width // lanes
        self.masked = masked
        self.mask = _lanes_below(builder, lanes, count) if masked else None

    def pointer(self, base, vector: int, vector_type=None):
        """The ``vector``-th vector at element pointer ``base`` (of the accumulators' type
        unless told)."""
        vector_type = self.vector if vector_type is None else vector_type
        moved = self.builder.gep(base, [ir.IntType(64)(vector * self.lanes)])
        return self.builder.bitcast(moved, vector_type.as_pointer())

    def _masked_intrinsic(self, name: str):
        vector = self.stored_vector
        element = {ir.FloatType(): "f32", ir.DoubleType(): "f64", ir.IntType(16): "i16"}[self.stored]
        suffix = f"v{self.lanes}{element}.p0"
        mask = ir.VectorType(ir.IntType(1), self.lanes)
        if name == "load":
            signature = ir.FunctionType(vector, [vector.as_pointer(), ir.IntType(32), mask, vector])
        else:
            signature = ir.FunctionType(ir.VoidType(), [vector, vector.as_pointer(), ir.IntType(32), mask])
        return cgutils.get_or_insert_function(self.builder.module, signature, f"llvm.masked.{name}.{suffix}")

    def is_last_masked(self, vector: int) -> bool:
        return self.masked and vector == self.vectors - 1

    def load(self, base, vector: int):
        """A vector of an array row, in the accumulators' type (lanes past the mask read as
        0 and not touched)."""
        pointer = self.pointer(base, vector, self.stored_vector)
        if self.is_last_masked(vector):
            value = self.builder.call(self._masked_intrinsic("load"),
                                      [pointer, self.alignment, self.mask, ir.Constant(self.stored_vector, None)])
        else:
            value = self.builder.load(pointer, align=self.alignment.constant)
        if not self.widens:
            return value
        words = ir.VectorType(ir.IntType(32), self.lanes)
        shifted = self.builder.shl(self.builder.zext(value, words), ir.Constant(words, [16] * self.lanes))
        return self.builder.bitcast(shifted, self.vector)

    def store(self, value, base, vector: int) -> None:
        """Store a vector into an array row (lanes past the mask not written)."""
        if self.widens:
            raise TypeError("a block writes float32 or float64 rows, not bfloat16")
        pointer = self.pointer(base, vector)
        if self.is_last_masked(vector):
            self.builder.call(self._masked_intrinsic("store"), [value, pointer, self.alignment, self.mask])
        else:
            self.builder.store(value, pointer, align=self.alignment.constant)


def _literal(value):
    return value.literal_value if isinstance(value, (types.IntegerLiteral, types.BooleanLiteral)) else None


def _block_intrinsic(build):
    """An intrinsic ``f(buffer, width, lanes, masked, array, row, column, count, value)`` that
    runs ``build(block, buffer_pointer, row_pointer, value)`` for a 1 x ``width`` block;
    ``width``, ``lanes`` and ``masked`` must be compile-time constants."""
    def typer(typingctx, buffer, width, lanes, masked, array, row, column, count, value):
        if None in (_literal(width), _literal(lanes), _literal(masked)):
            return None  # Numba retries with literal values

        def codegen(context, builder, signature, args):
            block = _Block(context, builder, array.dtype, _literal(width), _literal(lanes), _literal(masked), args[7])
            block.unit_weight = isinstance(value, types.Integer)
            view = context.make_array(array)(context, builder, args[4])
            row_pointer = cgutils.get_item_pointer(context, builder, array, view, [args[5], args[6]], wraparound=False)
            build(block, args[0], row_pointer,
                  context.cast(builder, args[8], signature.args[8], accumulator_dtype(array.dtype)))
            return context.get_dummy_value()
        return types.none(buffer, width, lanes, masked, array, row, column, count, value), codegen
    typer.__name__ = build.__name__
    typer.__doc__ = build.__doc__
    wrapped = intrinsic(typer)
    wrapped.generate = build  # the IR generator alone, for emitting the block outside Numba
    return wrapped


@_block_intrinsic
def block_fill(block, buffer, row, value):
    """``buffer[:width] = array[row, column:column + width] if value else 0`` (``value`` a
    flag: accumulate onto the row, or start from zero)."""
    builder = block.builder
    with builder.if_else(builder.fcmp_unordered("!=", value, ir.Constant(value.type, 0))) as (from_row, from_zero):
        with from_row:
            for vector in range(block.vectors):
                builder.store(block.load(row, vector), block.pointer(buffer, vector))
        with from_zero:
            for vector in range(block.vectors):
                builder.store(ir.Constant(block.vector, None), block.pointer(buffer, vector))


@_block_intrinsic
def block_accumulate(block, buffer, row, weight):
    """``buffer[:width] += weight * array[row, column:column + width]``; with an integer
    ``weight`` (1), ``buffer[:width] += array[...]``, no multiplication."""
    builder = block.builder
    scale = None if block.unit_weight else _splat(builder, weight, block.lanes)
    for vector in range(block.vectors):
        term = block.load(row, vector)
        if scale is not None:
            term = builder.fmul(scale, term)
        target = block.pointer(buffer, vector)
        builder.store(builder.fadd(builder.load(target), term), target)


@_block_intrinsic
def block_store(block, buffer, row, scale):
    """``array[row, column:column + width] = scale * buffer[:width]``."""
    builder = block.builder
    factor = _splat(builder, scale, block.lanes)
    for vector in range(block.vectors):
        block.store(builder.fmul(builder.load(block.pointer(buffer, vector)), factor), row, vector)


def host_features() -> set[str]:
    """The CPU features LLVM found on this host (``avx512f``, ``avx2``, ``sve``, ``neon``...)."""
    import llvmlite.binding as llvm

    return {name for name, enabled in llvm.get_host_cpu_features().items() if enabled}


_PR_SVE_GET_VL = 51  # prctl(2) option; the low 16 bits of its result are the length in bytes


@functools.cache
def sve_vector_bits() -> int | None:
    """This process's SVE vector length in bits (512 on the A64FX), or None without SVE."""
    if platform.machine() not in ("aarch64", "arm64") or "sve" not in host_features():
        return None
    try:
        length = ctypes.CDLL(None, use_errno=True).prctl(_PR_SVE_GET_VL, 0, 0, 0, 0)
    except (OSError, AttributeError):
        length = -1
    if length < 0:
        try:
            return 8 * int(Path("/proc/sys/abi/sve_default_vector_length").read_text())
        except (OSError, ValueError):
            return None
    return 8 * (length & 0xFFFF)


def vector_lanes(features: set[str] | None = None, sve_bits: int | None = None) -> int:
    """float32 lanes of the vectors the kernels are written in: 16 with AVX-512, SVE's
    length with SVE of a known length (16 on the A64FX), 8 with AVX, 4 otherwise (SSE,
    NEON). Without ``features``, this host's (and its SVE length)."""
    if features is None:
        features, sve_bits = host_features(), sve_vector_bits()
    if "avx512f" in features:
        return 16
    if "sve" in features and sve_bits:
        return sve_bits // 32
    if "avx" in features:
        return 8
    return 4


def vector_attributes(sve_bits: int | None = None) -> list[str]:
    """The LLVM function attributes that let the kernels' vectors be single registers
    (module docstring); ``sve_bits`` defaults to this host's SVE length."""
    sve_bits = sve_vector_bits() if sve_bits is None else sve_bits
    attributes = ['"prefer-vector-width"="512"', '"min-legal-vector-width"="512"']
    if sve_bits:
        granules = sve_bits // 128
        attributes.append(f"vscale_range({granules},{granules})")
    return attributes


#: Register names of each vector width in x86-64 and AArch64 assembly, widest first.
_REGISTERS = ((r"%zmm\d+|\bzmm\d+", "x86 AVX-512", 512), (r"%ymm\d+|\bymm\d+", "x86 AVX", 256),
              (r"\bz\d+\.[sd]\b", "AArch64 SVE", None), (r"\bv\d+\.[24][sd]\b", "AArch64 NEON", 128),
              (r"%xmm\d+|\bxmm\d+", "x86 SSE", 128))


def widest_vectors(assembly: str) -> dict:
    """The widest vector registers named in ``assembly``: ``{"isa", "bits"}`` (bits None
    for SVE, whose registers' names do not say their length), or a scalar ``isa``."""
    for pattern, isa, bits in _REGISTERS:
        if re.search(pattern, assembly):
            return {"isa": isa, "bits": bits}
    return {"isa": "scalar", "bits": None}


@functools.cache
def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The processor's name as the OS reports it (``AMD EPYC 9R14``, ``Intel(R) Xeon(R)
    Platinum 8592+``; on Arm, the implementer and part numbers), or ``platform.processor()``
    where there is no ``cpuinfo``: which CPU a measurement ran on, beside LLVM's name for
    the target it compiled for."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return platform.processor() or platform.machine()
    fields = dict(re.findall(r"^([^\t:\n]+?)[ \t]*:[ \t]*(.*)$", text, flags=re.MULTILINE))
    if fields.get("model name"):
        return fields["model name"]
    if "CPU part" in fields:
        return f"implementer {fields.get('CPU implementer', '?')} part {fields['CPU part']}"
    return platform.processor() or platform.machine()


def kernel_target() -> dict:
    """What the kernels are built for on this host: the CPU (its name, and the one Numba
    targets), its vector features, the SVE length, the float32 lanes of the kernels'
    vectors and their bits, and the threading layer they run on (the one asked for, until
    a parallel kernel has started it; :mod:`supergcn.kernels.jit`)."""
    import llvmlite.binding as llvm

    features = host_features()
    lanes = vector_lanes(features)
    return {"cpu_model": cpu_model(), "cpu": numba.config.CPU_NAME or llvm.get_host_cpu_name(),
            "vector_features": sorted(f for f in features if re.match(r"avx|sve|neon|asimd|fma", f)),
            "sve_vector_bits": sve_vector_bits(), "lanes": lanes, "vector_bits": 32 * lanes,
            "register_block": ACCUMULATOR_VECTORS * lanes, "threading_layer": threading_layer()}


def threading_layer() -> str:
    """numba's threading layer: the one running, else the one asked for."""
    try:
        return numba.threading_layer()
    except ValueError:  # no parallel kernel has started numba's threads yet
        return str(numba.config.THREADING_LAYER)


def compiled_for() -> dict:
    """:func:`kernel_target` and the widest vector registers in the machine code of a probe
    built as the kernels are (a masked block of accumulators, compiled afresh, about a
    second: Numba keeps no assembly of what it loads from its cache)."""
    import numpy as np

    lanes = vector_lanes()
    width = 2 * lanes

    @numba.njit(nogil=True)
    def probe(x, out, count):
        prefer_wide_vectors()
        block = stack_buffer(width, x)
        block_fill(block, width, lanes, True, out, 0, 0, count, 0)
        for row in range(x.shape[0]):
            block_accumulate(block, width, lanes, True, x, row, 0, count, 1)
        block_store(block, width, lanes, True, out, 0, 0, count, 1.0)

    x = np.ones((2, width), np.float32)
    probe(x, np.empty_like(x), 1)
    assembly = "\n".join(probe.inspect_asm().values())
    return {**kernel_target(), "emitted": widest_vectors(assembly)}
