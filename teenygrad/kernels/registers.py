"""Keeping the micro-kernel's accumulators in registers (chapter 3): what numba does not offer, built here.

`local_array(n, dtype)` is a length-n array on the stack. `matmul._micro_kernel` keeps its MR x NR block of C in
such arrays: once the loops over them are unrolled, LLVM holds every element in a vector register.
`vector_store(dst, acc, n, accumulate)` writes such an array back as one n-wide vector operation, and
`vector_zero(acc, n)` clears it with one.

Each is built on a numba intrinsic: a few lines of LLVM IR, emitted where it is called. Without the JIT
(TEENYGRAD_JIT=0) they are plain numpy stand-ins with the same results.
"""
from __future__ import annotations

import numba
import numpy as np

from teenygrad.kernels.jit import JIT_ENABLED

if JIT_ENABLED:
    from llvmlite import ir as _llvm_ir
    from numba import types as _types
    from numba.core import cgutils as _cgutils
    from numba.extending import intrinsic as _intrinsic

    @_intrinsic
    def _stack_buffer(typingctx, n, dtype):
        """Pointer to `n` (a compile-time constant) uninitialised elements of `dtype` on the stack."""
        if not isinstance(n, _types.IntegerLiteral):
            return None
        size = n.literal_value

        def codegen(context, builder, signature, args):
            elem = context.get_value_type(dtype.dtype)
            return _cgutils.alloca_once(builder, elem, size=_llvm_ir.Constant(_llvm_ir.IntType(64), size))

        return _types.CPointer(dtype.dtype)(n, dtype), codegen

    @numba.njit(inline="always", cache=True)
    def local_array(n, dtype):
        """A length-`n` array on the stack (`n` must be a constant, e.g. a module-level int).

        Why not np.empty? A heap array could, as far as the compiler knows, overlap the input arrays, so
        every `acc[j] += ...` must go to memory. A stack array provably overlaps nothing, so once the
        loops over it are unrolled LLVM keeps its elements in registers."""
        return numba.carray(_stack_buffer(n, dtype), n)

    def _vector_at(context, builder, array_type, array, n):
        """The first n elements of an array (its data pointer), as a pointer to one n-wide LLVM vector."""
        vec = _llvm_ir.VectorType(context.get_value_type(array_type.dtype), n)
        return builder.bitcast(context.make_array(array_type)(context, builder, array).data, vec.as_pointer())

    @_intrinsic
    def vector_store(typingctx, dst, acc, n, accumulate):
        """dst[:n] = acc[:n], or += when `accumulate`, as one n-wide vector operation (n a constant; dst and acc
        contiguous; with accumulate False, a vector copy). Why by hand? numba switches off LLVM's SLP vectorizer,
        which is the pass that would join the n scalar adds of a fully unrolled row into vector ones: without it
        a row costs n loads, adds and stores instead of two of each (measured: 12% of a 768x128 @ 128x384
        product, K = 128)."""
        if not isinstance(n, _types.IntegerLiteral):
            return None

        def codegen(context, builder, signature, args):
            ptr = [_vector_at(context, builder, ty, a, n.literal_value) for ty, a in zip(signature.args[:2], args[:2])]
            new = builder.load(ptr[1], align=1)
            total = builder.fadd(builder.load(ptr[0], align=1), new)
            builder.store(builder.select(args[3], total, new), ptr[0], align=1)
            return context.get_dummy_value()

        return _types.none(dst, acc, n, accumulate), codegen

    @_intrinsic
    def vector_zero(typingctx, acc, n):
        """acc[:n] = 0 as one n-wide vector store (n a constant, acc contiguous). Why by hand? A loop of n scalar
        zeros is merged by LLVM into stores of odd widths, and the vector loads of the accumulators that follow
        cannot be forwarded from them: the processor stalls on each (measured: 4-7% of a product with K = 128).
        After one vector store, LLVM sees the loads read zeros and starts the accumulators in registers."""
        if not isinstance(n, _types.IntegerLiteral):
            return None

        def codegen(context, builder, signature, args):
            ptr = _vector_at(context, builder, signature.args[0], args[0], n.literal_value)
            builder.store(_llvm_ir.Constant(ptr.type.pointee, None), ptr, align=1)
            return context.get_dummy_value()

        return _types.none(acc, n), codegen
else:
    def local_array(n, dtype):
        """Plain-Python stand-in (TEENYGRAD_JIT=0): a numpy array."""
        return np.empty(n, dtype)

    def vector_store(dst, acc, n, accumulate):
        """Plain-Python stand-in (TEENYGRAD_JIT=0): the same loop as `matmul._store_row`, no numpy arithmetic."""
        for j in range(n):
            dst[j] = dst[j] + acc[j] if accumulate else acc[j]

    def vector_zero(acc, n):
        """Plain-Python stand-in (TEENYGRAD_JIT=0)."""
        for j in range(n):
            acc[j] = 0
