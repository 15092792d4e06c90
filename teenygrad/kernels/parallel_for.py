"""`parallel_for`: run a generated kernel's rows on all threads, with one compiled driver for every kernel (chapter 10).

A generated loop kernel (`teenygrad.compiler.codegen`) is a serial function `body(a0, a1, ..., first, last)` over rows
first..last. To share the rows among threads, something has to call it from a `prange` loop. Generating that
driver beside each body costs a second numba compile per kernel, the slowest kind (parallel lowering, and the
body compiled again inside it): measured, 0.3-1.1 s each, about half of a GPT step's cold compile. Instead the
driver is written once, here: it takes the body's *address* (an integer) and its arrays (a tuple), so numba
compiles it once per tuple of array types, for every graph, and caches it on disk with the package.

    parallel_for(address_of(body), (a0, a1), n, chunks)   # body(a0, a1, lo, hi) for `chunks` slices of range(n)

Without the JIT (TEENYGRAD_JIT=0) the same call takes the Python function itself and runs the chunks in turn.
"""
from __future__ import annotations

from typing import Callable

from teenygrad.kernels.jit import JIT_ENABLED, kernel, prange

if JIT_ENABLED:
    from numba import types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def call_at(typingctx, address, args):
        """Call the compiled numba function at `address` (its native entry point) with the tuple `args`.
        The caller promises the function takes exactly those types and returns None: nothing checks it."""
        def codegen(context, builder, signature, llargs):
            argtys = list(args.types)
            fnty = context.call_conv.get_function_type(types.none, argtys)
            fn = builder.inttoptr(llargs[0], fnty.as_pointer())
            context.call_conv.call_function(builder, fn, types.none, argtys,
                                            cgutils.unpack_tuple(builder, llargs[1], len(argtys)))
            return context.get_dummy_value()
        return types.void(address, args), codegen
else:
    def call_at(fn, args):  # without the JIT the "address" is the function
        fn(*args)


@kernel(parallel=True)
def parallel_for(address, args, n, chunks):
    """body(*args, lo, hi) for each of `chunks` equal slices lo..hi of range(n), the slices shared among threads."""
    for c in prange(chunks):
        call_at(address, args + (c * n // chunks, (c + 1) * n // chunks))


def address_of(body: Callable, signature: tuple) -> int | Callable:
    """What `parallel_for` takes for `body` compiled for `signature` (argument types): the address of its machine
    code, or, without the JIT, the function itself. The address is valid while `body` is alive."""
    if not JIT_ENABLED:
        return body
    result = body.overloads[signature]
    return result.library.get_pointer_to_function(result.fndesc.llvm_func_name)
