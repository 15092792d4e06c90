"""Editions of teenygrad (every chapter's exercise): the book's, the learner's, and *mine*.

The package is complete: it is the book's answer to every exercise. A function an exercise asks for is marked
where it is defined, so a reader sees which part of which exercise it is:

    @exercise("06-tensor-autograd", "reduction_rules")
    def max_backward(ctx: Node, g: Tensor) -> tuple[Tensor]:
        ...

Three things follow from that one mark.

- **The learner's edition** (`make learner`, `build_learner`) is a copy of the package in which the body of
  every marked function is replaced by `raise NotImplementedError(...)` naming the exercise and part. An
  instructor installs it on the course's JupyterHub, and the autograder grades every notebook on it (the
  exercise's own pieces withheld), so an answer can't be imported, subclassed or captured from teenygrad.
- **The learner's code goes in.** `install(assignment, part, fn, ...)` puts a learner's function in place of
  the piece for this process: every caller of the piece, the package's own included, now runs the learner's
  code. `make check` records the code of every part that passed in `mine/NN-name.py`; with the environment
  variable `TEENYGRAD=mine` (or `load_mine()`), any chapter or script runs on the learner's pieces and the
  book's everywhere else. `python -m teenygrad` prints which pieces are the learner's.
- **Withholding.** With `TEENYGRAD_WITHHOLD=06-tensor-autograd` (a comma-separated list, or `all`) the marked
  functions of those exercises raise instead of running the book's body: what the grader does when it cannot
  swap the files themselves (grading without root).
"""
from __future__ import annotations

import ast
import bisect
import contextlib
import functools
import inspect
import io
import os
import shutil
import sys
import textwrap
import tokenize
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

PACKAGE = Path(__file__).resolve().parent
MINE_ENV, WITHHOLD_ENV, EDITION_ENV = "TEENYGRAD_MINE", "TEENYGRAD_WITHHOLD", "TEENYGRAD"

# (assignment, part, function name) -> the learner's function, for this process
_INSTALLED: dict[tuple[str, str, str], Callable[..., Any]] = {}
# where each installed part came from (a notebook, mine/NN.py), for the table
_ORIGIN: dict[tuple[str, str], str] = {}


def _withheld() -> frozenset[str]:
    value = os.environ.get(WITHHOLD_ENV, "")
    return frozenset(a.strip() for a in value.split(",") if a.strip())


_WITHHELD = _withheld()


def todo(assignment: str, part: str) -> str:
    """What a stub says: which exercise and part to write, and where."""
    return (f"exercise {assignment}, part {part!r}: not written yet. Write it in exercises/{assignment}.ipynb; "
            f"once `make check NB=exercises/{assignment}.ipynb` passes the part, `TEENYGRAD=mine` runs it here.")


def exercise(assignment: str, part: str, kernel: bool = False) -> Callable[[F], F]:
    """Mark a function as part `part` of exercise `assignment` (see the module docstring).

    The marked function runs unchanged until a learner's function is installed for it. The wrapper costs one
    dictionary lookup per call. `kernel=True` marks a numba kernel that the part's Python-level function
    launches (and other kernels may call; it must return nothing, writing its results into arrays): it is not
    wrapped, only stubbed in the learner's edition, so that the book's kernel can't answer the part there
    either; the learner installs the Python-level function."""
    def mark(fn: F) -> F:
        if kernel:
            return fn
        key = (assignment, part, fn.__name__)

        def piece(*args: Any, **kwargs: Any) -> Any:
            mine = _INSTALLED.get(key)
            if mine is not None:
                return mine(*args, **kwargs)
            if assignment in _WITHHELD or "all" in _WITHHELD:
                raise NotImplementedError(todo(assignment, part))
            return fn(*args, **kwargs)

        functools.update_wrapper(piece, fn)
        del piece.__wrapped__  # the book's body is not handed out through the wrapper
        piece.__signature__ = inspect.signature(fn)  # ... but its contract is: help() and inspect show it
        piece.__teenygrad_piece__ = key
        return piece  # type: ignore[return-value]
    return mark


# ---- the pieces, read from the source (nothing is registered at import) ------------------------------------

@dataclass(frozen=True)
class Piece:
    assignment: str
    part: str
    module: str    # teenygrad.ops.movement
    qualname: str  # unbroadcast, or Class.method
    path: Path
    line: int      # the `def` line
    kernel: bool = False  # a numba kernel behind the part's Python-level piece: stubbed, never installed
    body: tuple[int, int] = (0, 0)  # the first and last line of its body (after the docstring's first line)

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]

    @property
    def spellings(self) -> tuple[str, ...]:
        """How a learner's file may define it: a top-level function of its name, or, for a method, that method of a
        class of its class's name (`class Linear` with `def __init__`, for nn.Linear.__init__: the layers'
        methods share names, so they cannot all be top-level functions)."""
        owner = self.qualname.rsplit(".", 2)[-2:]
        return (self.name, ".".join(owner)) if len(owner) == 2 else (self.name,)

    @property
    def lines(self) -> int:
        """Code lines of its body (`code_lines`): how much of the package the learner writes here. Counted when
        asked (the capstone weighs pieces by it), not in `pieces()`, which every `install` calls."""
        first, last = self.body
        if not first:  # a piece made by hand, not read from the source
            return 0
        return code_lines(textwrap.dedent("\n".join(self.path.read_text().splitlines()[first - 1:last])))


def _marks(tree: ast.AST) -> Iterator[tuple[ast.FunctionDef, str, str, str, bool]]:
    """(function node, qualname, assignment, part, kernel) of every @exercise(...) function in a module."""
    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[ast.FunctionDef, str, str, str, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                yield from walk(child, prefix + child.name + ".")
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for deco in child.decorator_list:
                    if (isinstance(deco, ast.Call) and getattr(deco.func, "id", getattr(deco.func, "attr", None))
                            == "exercise" and len(deco.args) == 2
                            and all(isinstance(a, ast.Constant) for a in deco.args)):
                        kernel = any(k.arg == "kernel" and getattr(k.value, "value", False) for k in deco.keywords)
                        yield child, prefix + child.name, deco.args[0].value, deco.args[1].value, kernel
    yield from walk(tree, "")


# path -> ((mtime, size), its pieces): parsing the package's source takes a fifth of a second, and every
# `install` (each test cell of an exercise) asks for the pieces; a file is parsed again only when it changed
_PARSED: dict[Path, tuple[tuple[int, int], list[Piece]]] = {}


def pieces(package: Path = PACKAGE) -> list[Piece]:
    """Every marked function of the package, in assignment, part and source order."""
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "edition.py" or "__pycache__" in path.parts:
            continue
        stat = path.stat()
        stamp = (stat.st_mtime_ns, stat.st_size)
        if path not in _PARSED or _PARSED[path][0] != stamp:
            _PARSED[path] = (stamp, list(_pieces_of(path, package)))
        found += _PARSED[path][1]
    return sorted(found, key=lambda p: (p.assignment, p.part, p.module, p.line))


def _pieces_of(path: Path, package: Path) -> Iterator[Piece]:
    source = path.read_text()
    if "@exercise(" not in source:
        return
    module = ".".join(("teenygrad", *path.relative_to(package).with_suffix("").parts))
    for node, qualname, assignment, part, kernel in _marks(ast.parse(source)):
        yield Piece(assignment, part, module, qualname, path, node.lineno, kernel,
                    (node.body[0].lineno, node.end_lineno))


NOT_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING,
            tokenize.ENDMARKER}


def code_lines(source: str) -> int:
    """The lines of `source` that hold part of a token other than a comment, a line break, an indent or a dedent,
    and a bare string statement (a docstring, or any string standing alone as a statement). A multi-line token
    (a string assigned to a name) counts every line it spans; a line continued with a backslash counts. The
    measure of the package's size budget (tests/test_budget.py) and of a piece's weight in the capstone."""
    prose = sorted(((n.lineno, n.col_offset), (n.end_lineno, n.end_col_offset)) for n in ast.walk(ast.parse(source))
                   if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str))
    starts = [start for start, _ in prose]
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        k = bisect.bisect_right(starts, tok.start) - 1  # the last bare string starting at or before this token
        if tok.type in NOT_CODE or (k >= 0 and tok.end <= prose[k][1]):
            continue
        lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines)


def parts(assignment: str) -> dict[str, list[Piece]]:
    """The pieces of one exercise, by part."""
    out: dict[str, list[Piece]] = {}
    for p in pieces():
        if p.assignment == assignment:
            out.setdefault(p.part, []).append(p)
    return out


# ---- putting a learner's function in -------------------------------------------------------------------------

def install(assignment: str, part: str, *fns: Callable[..., Any], origin: str = "this process") -> None:
    """From now on, the package's piece(s) of `part` run `fns` (matched by function name)."""
    want = [p for p in parts(assignment).get(part, []) if not p.kernel]
    if not want:
        known = ", ".join(parts(assignment)) or "none"
        raise KeyError(f"exercise {assignment} has no part {part!r} in teenygrad (its parts: {known})")
    names = {p.name for p in want}
    for fn in fns:
        name = getattr(fn, "__name__", None)
        if getattr(fn, "__teenygrad_piece__", None):
            raise ValueError(f"exercise {assignment}, part {part!r}: {name} is teenygrad's own piece, not yours; "
                             "write the function yourself")
        if not callable(fn) or name not in names:
            raise ValueError(f"exercise {assignment}, part {part!r} is made of {', '.join(sorted(names))}; "
                             f"got {name!r}: define your function with the same name")
    for fn in fns:
        _INSTALLED[(assignment, part, fn.__name__)] = fn
    _ORIGIN[(assignment, part)] = origin


def uninstall(assignment: str, part: str) -> None:
    for key in [k for k in _INSTALLED if k[:2] == (assignment, part)]:
        del _INSTALLED[key]
    _ORIGIN.pop((assignment, part), None)


@contextlib.contextmanager
def installed(assignment: str, part: str, *fns: Callable[..., Any]) -> Iterator[None]:
    """`install` for the length of a `with` block; what was installed before comes back after."""
    saved = {k: v for k, v in _INSTALLED.items() if k[:2] == (assignment, part)}
    origin = _ORIGIN.get((assignment, part))
    install(assignment, part, *fns)
    try:
        yield
    finally:
        uninstall(assignment, part)
        _INSTALLED.update(saved)
        if origin:
            _ORIGIN[(assignment, part)] = origin


def installed_functions() -> dict[tuple[str, str, str], Callable[..., Any]]:
    """(assignment, part, function name) -> the learner's function installed in this process."""
    return dict(_INSTALLED)


def is_mine(assignment: str, part: str) -> bool:
    return (assignment, part) in _ORIGIN


# ---- mine/: the code of every part that passed `make check` ----------------------------------------------------

def mine_dir() -> Path:
    """Where `make check` keeps the learner's passed parts: $TEENYGRAD_MINE, else mine/ beside the package."""
    return Path(os.environ.get(MINE_ENV) or PACKAGE.parent / "mine")


def load_mine(folder: Path | None = None) -> list[tuple[str, str]]:
    """Install every part recorded in mine/ (see `autograder.mine`); return the (assignment, part)s installed."""
    folder = folder or mine_dir()
    done = []
    for path in sorted(folder.glob("[0-9][0-9]-*.py")):
        assignment = path.stem
        # a module of its own in sys.modules: numba's disk cache rebuilds a kernel's globals by importing its
        # module by name, and a kernel of an unregistered module saved to the cache could not be loaded by the
        # next process (ModuleNotFoundError: No module named '<dynamic>')
        module = types.ModuleType(f"teenygrad_mine_{assignment.replace('-', '_')}")
        module.__file__ = str(path)
        sys.modules[module.__name__] = module
        namespace: dict[str, Any] = module.__dict__
        try:
            exec(compile(path.read_text(), str(path), "exec"), namespace)  # the learner's own code, run as a script
        except Exception as e:  # one broken file must not stop `import teenygrad`: say so, use the book's
            sys.modules.pop(module.__name__, None)
            print(f"teenygrad: {path} could not be loaded ({type(e).__name__}: {e}); the book's pieces of "
                  f"{assignment} are used. Check the notebook again, or move the file out of {folder}.",
                  file=sys.stderr)
            continue
        for part in namespace.get("PARTS", []):
            if not [p for p in parts(assignment).get(part, []) if not p.kernel]:
                # recorded by an older edition of the exercise, whose parts have changed since
                print(f"teenygrad: {path} lists part {part!r}, which is no longer a piece of exercise {assignment}; "
                      "it is ignored", file=sys.stderr)
                continue
            found = {p.qualname: learners_function(namespace, p) for p in parts(assignment)[part] if not p.kernel}
            missing = [q for q, fn in found.items() if fn is None]
            if missing:
                print(f"teenygrad: {path} lists part {part!r} but does not define {', '.join(missing)}; "
                      "the book's piece is used", file=sys.stderr)
                continue
            install(assignment, part, *found.values(), origin=str(path))
            done.append((assignment, part))
    return done


def learners_function(namespace: dict[str, Any], piece: Piece) -> Callable[..., Any] | None:
    """The learner's function for `piece` in the namespace their file ran in (see `Piece.spellings`): the method of
    a class of theirs of the piece's class name, else a top-level function of its name, else None."""
    owner, _, name = piece.qualname.rpartition(".")
    cls = namespace.get(owner.rsplit(".", 1)[-1]) if owner else None
    if isinstance(cls, type) and cls.__module__.split(".")[0] != "teenygrad" and callable(vars(cls).get(name)):
        return vars(cls)[name]
    return namespace.get(name)


def table() -> list[tuple[str, str, str, str]]:
    """(exercise, part, piece, whose) for every piece: whose is the file it came from, or "the book's"."""
    return [(p.assignment, p.part, f"{p.module}.{p.qualname}", _ORIGIN.get((p.assignment, p.part), "the book's"))
            for p in pieces()]


# ---- the learner's edition ------------------------------------------------------------------------------------

def stubbed_source(source: str, assignments: frozenset[str] | None = None) -> str:
    """`source` with the body of every marked function (of `assignments`, default all) replaced by a stub.

    The signature, the decorator and the docstring stay: they are the contract the exercise states. A marked
    kernel's stub raises too: numba compiles a raise with a constant message, so kernels calling it still do."""
    lines = source.splitlines(keepends=True)
    edits = []
    for node, _qualname, assignment, part, _kernel in _marks(ast.parse(source)):
        if assignments is not None and assignment not in assignments:
            continue
        body = node.body
        first = body[1] if (len(body) > 1 and isinstance(body[0], ast.Expr)
                            and isinstance(getattr(body[0], "value", None), ast.Constant)
                            and isinstance(body[0].value.value, str)) else body[0]
        # a decorated statement (a kernel defined inside a function that makes it) starts at its first decorator
        start = min([first.lineno, *(d.lineno for d in getattr(first, "decorator_list", []))])
        # what precedes the body on its first line: indentation, or `def f(x):` for a one-line function
        prefix = lines[start - 1][:first.col_offset]
        stub = f"{prefix}raise NotImplementedError({todo(assignment, part)!r})\n"
        edits.append((start - 1, node.end_lineno, stub))
    for start, end, stub in sorted(edits, reverse=True):
        lines[start:end] = [stub]
    return "".join(lines)


def build_learner(dest: Path, assignments: frozenset[str] | None = None, package: Path = PACKAGE) -> Path:
    """Write the learner's edition of `package` to `dest/teenygrad` (with a pyproject.toml to pip-install it).

    Only the pieces of `assignments` (default: every exercise) are stubs. Unchanged files keep their times,
    so numba's cache of their kernels stays valid. Returns the package folder."""
    dest = Path(dest)
    out = dest / "teenygrad"
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(package, out, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for path in sorted(out.rglob("*.py")):
        source = path.read_text()
        if "@exercise(" in source and path.name != "edition.py":
            stubbed = stubbed_source(source, assignments)
            if stubbed != source:
                path.write_text(stubbed)
    (dest / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "teenygrad"\nversion = "0.1.0+learner"\n'
        'description = "teenygrad, the learner\'s edition: the exercises\' pieces are yours to write"\n'
        'requires-python = ">=3.11"\ndependencies = ["numpy", "numba"]\n\n'
        '[tool.setuptools.packages.find]\ninclude = ["teenygrad*"]\n\n'
        '[tool.setuptools.package-data]\nteenygrad = ["data/*"]\n')
    return out


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m teenygrad",
                                     description="Which pieces of teenygrad are yours; build the learner's edition.")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("mine", help="the table of pieces: yours (from mine/) or the book's (the default command)")
    learner = sub.add_parser("learner", help="write the learner's edition (every exercise's pieces are stubs)")
    learner.add_argument("dest", nargs="?", default="build/learner", help="folder to write (default build/learner)")
    args = parser.parse_args(argv)
    if args.command == "learner":
        out = build_learner(Path(args.dest))
        print(f"wrote the learner's edition to {out} ({len(pieces())} pieces are stubs); "
              f"install it with: pip install {Path(args.dest)}")
        return 0
    load_mine()
    rows = table()
    mine = sum(whose != "the book's" for *_, whose in rows)
    width = [max(len(r[i]) for r in rows) if rows else 4 for i in range(3)]
    for a, part, piece, whose in rows:
        print(f"{a:<{width[0]}}  {part:<{width[1]}}  {piece:<{width[2]}}  {whose}")
    print(f"{mine} of {len(rows)} pieces are yours (from {mine_dir()}); the rest are the book's.")
    return 0


