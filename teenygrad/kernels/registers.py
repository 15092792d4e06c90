"""Keeping the micro-kernel's accumulators in registers (chapter 3): what numba does not offer, built here.

`local_array(n, dtype)` is a length-n array on the stack. `matmul._micro_kernel` keeps its MR x NR block of C in
such arrays and touches them only as whole n-wide vectors, so LLVM turns each into one vector value held in
registers (its SROA pass does this for a stack array that is only ever read and written whole):
`vector_zero(acc, n)` clears one, `vector_fma(acc, x, b, offset, n)` adds x times n elements of b to it,
`vector_store(dst, acc, n, accumulate)` writes it to an array and `vector_store_at(out, i, j, acc, n,
accumulate)` to row i of a matrix from column j.

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
        every `acc[j] += ...` must go to memory. A stack array provably overlaps nothing, so LLVM can keep it
        in registers: all of it, for the whole loop nest, when it is only read and written whole."""
        return numba.carray(_stack_buffer(n, dtype), n)

    def _vector_at(context, builder, array_type, array, n):
        """The first n elements of an array (its data pointer), as a pointer to one n-wide LLVM vector."""
        vec = _llvm_ir.VectorType(context.get_value_type(array_type.dtype), n)
        return builder.bitcast(context.make_array(array_type)(context, builder, array).data, vec.as_pointer())

    def _write(builder, dst, src, accumulate):  # *dst = *src, or += when accumulate, pointers to one vector each
        new = builder.load(src, align=1)
        total = builder.fadd(builder.load(dst, align=1), new)
        builder.store(builder.select(accumulate, total, new), dst, align=1)

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
            _write(builder, ptr[0], ptr[1], args[3])
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

    @_intrinsic
    def vector_fma(typingctx, acc, x, b, offset, n):
        """acc[:n] += x * b[offset:offset + n] as one n-wide fused multiply-add (n a constant; acc and b contiguous;
        no bounds check). Why by hand? Written as a loop over the n elements, acc is read and written one element
        at a time at a variable index, so LLVM cannot hold it as one vector value: it kept each tile's
        accumulators in registers inside the depth loop but cleared, loaded and stored them through the stack
        around it, a fixed cost per tile that a shallow product (attention's, depth 32) paid in full."""
        if not isinstance(n, _types.IntegerLiteral):
            return None

        def codegen(context, builder, signature, args):
            acc_ptr = _vector_at(context, builder, signature.args[0], args[0], n.literal_value)
            vec = acc_ptr.type.pointee
            data = context.make_array(signature.args[2])(context, builder, args[2]).data
            b_vec = builder.load(builder.bitcast(builder.gep(data, [args[3]]), vec.as_pointer()), align=1)
            x = context.cast(builder, args[1], signature.args[1], signature.args[0].dtype)
            lanes = builder.insert_element(_llvm_ir.Constant(vec, _llvm_ir.Undefined), x, _llvm_ir.IntType(32)(0))
            x_vec = builder.shuffle_vector(lanes, _llvm_ir.Constant(vec, _llvm_ir.Undefined),
                                           _llvm_ir.Constant(_llvm_ir.VectorType(_llvm_ir.IntType(32), vec.count),
                                                             [0] * vec.count))  # x in every lane
            suffix = f"v{vec.count}f{signature.args[0].dtype.bitwidth}"  # llvm.fma.v32f32: one rounding per lane
            fma = _cgutils.get_or_insert_function(builder.module, _llvm_ir.FunctionType(vec, [vec] * 3),
                                                  f"llvm.fma.{suffix}")
            builder.store(builder.call(fma, [x_vec, b_vec, builder.load(acc_ptr, align=1)]), acc_ptr, align=1)
            return context.get_dummy_value()

        return _types.none(acc, x, b, offset, n), codegen

    @_intrinsic
    def vector_store_at(typingctx, out, i, j, acc, n, accumulate):
        """`vector_store(out[i, j:j + n], acc, n, accumulate)` without making a view of out, whose reference
        counting cost two calls into numba's runtime per row (out's rows contiguous; no bounds check)."""
        if not isinstance(n, _types.IntegerLiteral):
            return None

        def codegen(context, builder, signature, args):
            o = context.make_array(signature.args[0])(context, builder, args[0])
            ptr = _cgutils.get_item_pointer2(context, builder, o.data, _cgutils.unpack_tuple(builder, o.shape, 2),
                                             _cgutils.unpack_tuple(builder, o.strides, 2), signature.args[0].layout,
                                             [args[1], args[2]], wraparound=False, boundscheck=False)
            src = _vector_at(context, builder, signature.args[3], args[3], n.literal_value)
            _write(builder, builder.bitcast(ptr, src.type), src, args[5])
            return context.get_dummy_value()

        return _types.none(out, i, j, acc, n, accumulate), codegen
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

    def vector_fma(acc, x, b, offset, n):
        """Plain-Python stand-in (TEENYGRAD_JIT=0)."""
        for j in range(n):
            acc[j] += x * b[offset + j]

    def vector_store_at(out, i, j, acc, n, accumulate):
        """Plain-Python stand-in (TEENYGRAD_JIT=0)."""
        vector_store(out[i, j:j + n], acc, n, accumulate)
