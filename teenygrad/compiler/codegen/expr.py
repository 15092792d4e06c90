"""Expressions (chapter 10): a view as index arithmetic (`index_expr`), and an expression tree as straight-line code
at one point of the iteration space (`Expr`): one variable per node (SSA), constants of the graph's dtype."""
from __future__ import annotations

from teenygrad.compiler.codegen.source import CAST, Source, slot_name
from teenygrad.compiler.ir import Node
from teenygrad.compiler.passes import View
from teenygrad.compiler.schedule import Schedule
from teenygrad.edition import exercise

FUNC = {"exp": "np.exp", "log": "np.log", "sqrt": "np.sqrt", "tanh": "np.tanh"}
INFIX = {"add": "+", "sub": "-", "mul": "*", "lt": "<", "eq": "=="}


@exercise("10-compiler", "index_expr")
def index_expr(view: View, names: list[str]) -> str:
    """The position in its flat buffer of element (names[0], names[1], ...) of `view`, as Python source:
    offset + i0 * stride0 + i1 * stride1 + ..., leaving out what is always 0 (a zero offset, a broadcast axis's
    stride 0, an axis of length 1) and writing a stride of 1 as the bare name. "0" when nothing is left."""
    terms = [str(view.offset)] if view.offset else []
    terms += [names[d] if st == 1 else f"{names[d]} * {st}" for d, st in enumerate(view.strides)
              if st != 0 and view.shape[d] != 1]
    return " + ".join(terms) or "0"


class Expr:
    """Emits the straight-line code of one expression tree at one point of the iteration space."""

    def __init__(self, src: Source, sched: Schedule, names: list[str], local: dict[int, str],
                 saved: dict[int, str] | None = None, at: str = "") -> None:
        self.src, self.sched, self.names, self.local = src, sched, names, local
        self.memo: dict[int, str] = {}
        self.saved, self.at = saved or {}, at  # values an earlier stage kept in a row buffer, read at index `at`

    def __call__(self, n: Node) -> str:
        if id(n) not in self.memo:
            if id(n) in self.saved:
                self.memo[id(n)] = self.src.var()
                self.src.line(f"{self.memo[id(n)]} = {self.saved[id(n)]}[u({self.at})]")
            else:
                self.memo[id(n)] = self.emit(n)
        return self.memo[id(n)]

    @exercise("10-compiler", "emit")
    def emit(self, n: Node) -> str:
        """Write the lines that compute node `n` at the current point and return the name of its value (chapter 10,
        "Code generation"): a constant is `src.const(value, dtype)`; a view is a register (`local`), an arange's
        index, or `slot[u(index_expr)]`; any other op one fresh variable, `t = <code>`, on its sources' names
        (`self(s)`), in `n.dtype`: an int64 division truncated, a cast to bool `!= 0`, float32 tanh by the vectorisable
        tanh32 and float32 exp by exp32 where -87 < a < 88, exactly 0 where a <= -87 and a * inf above (inf; NaN for
        NaN): not numpy's float32 exp, which is still finite up to 88.72 and tiny (not 0) down to -103.9. exp, log,
        sqrt, tanh, recip and pow are of floats only (`ir.FLOAT_ONLY`: the IR refuses an int64 or bool operand)."""
        src = self.src
        if n.op == "const":
            return src.const(n.arg, n.dtype)
        if n.op == "view":
            base = n.srcs[0]
            if id(base) in self.local:           # a reduction of this kernel, held in a register
                return self.local[id(base)]
            index = index_expr(n.arg, self.names)
            if base.op == "arange":
                return f"np.int64({index})"
            v = src.var()
            src.line(f"{v} = {slot_name(self.sched.slots[id(base)])}[u({index})]")
            return v
        a = [self(s) for s in n.srcs]
        if n.op in INFIX:
            text = f"{a[0]} {INFIX[n.op]} {a[1]}"
        elif n.op == "div":
            text = f"{a[0]} / {a[1]}" if n.dtype != "int64" else f"np.int64({a[0]} / {a[1]})"
        elif n.op == "exp" and n.dtype == "float32":  # vectorisable; outside (-87, 88): 0 below, inf above
            e = src.var()
            src.line(f"{e} = exp32({a[0]})")
            text = (f"{e} if {a[0]} < {src.const(88.0, 'float32')} and {a[0]} > {src.const(-87.0, 'float32')} "
                    f"else ({src.const(0.0, 'float32')} if {a[0]} <= {src.const(-87.0, 'float32')} "
                    f"else {a[0]} * {src.const(float('inf'), 'float32')})")
        elif n.op == "tanh" and n.dtype == "float32":
            text = f"tanh32({a[0]})"
        elif n.op in FUNC:
            text = f"{FUNC[n.op]}({a[0]})"
        elif n.op == "neg":
            text = f"-{a[0]}"
        elif n.op == "recip":
            text = f"{src.const(1.0, n.dtype)} / {a[0]}"
        elif n.op == "pow":
            text = f"{a[0]} ** {a[1]}"
        elif n.op == "maximum":
            text = f"np.maximum({a[0]}, {a[1]})"
        elif n.op == "where":
            text = f"{a[1]} if {a[0]} else {a[2]}"
        elif n.op == "cast":
            text = f"{a[0]} != 0" if n.dtype == "bool" else f"{CAST[n.dtype]}({a[0]})"
        else:
            raise NotImplementedError(f"codegen: no code for op {n.op!r}")
        v = src.var()
        src.line(f"{v} = {text}")
        return v


def init_value(n: Node) -> str:
    if n.op == "sum":
        return "0.0" if n.dtype.startswith("float") else "0"
    return {"bool": "False", "int64": "-9223372036854775807 - 1"}.get(n.dtype, "-np.inf")
