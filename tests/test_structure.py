"""The package's shape, read from its imports (nothing is run): the compiler is one package reached through its
`__init__`; the only import loop is Tensor <-> the op layer; no two modules import each other even lazily (from
inside a function) but the engine, which reads the op layer's rule table when backward runs; no module imports
another module's underscore names. Imports only a type checker reads (`if TYPE_CHECKING:`) do not count.
Each check is also run on a small made-up package that breaks it."""
from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

PACKAGES = ("teenygrad", "autograder")
# teenygrad's one loop (ops/__init__ says why): tensor.py imports the op families at its end, they import Tensor
ALLOWED_LOOP = "teenygrad.tensor"
# the engine finds each node's rule in `teenygrad.ops.RULES` when backward runs (autograd._rules, a lazy import):
# the op layer records into the engine, and the engine never imports the op layer while it is being imported
LAZY_BACK_EDGES = {("teenygrad.autograd", "teenygrad.ops")}


def module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(root: Path, packages=PACKAGES) -> dict[str, list[tuple[str, str | None, ast.AST]]]:
    """module -> [(imported module, the name taken from it or None, the node)], for modules of `packages`; a
    node inside a function has `.lazy` set."""
    paths = {module_name(root, p): p for pkg in packages for p in (root / pkg).rglob("*.py")}
    out: dict[str, list[tuple[str, str | None, ast.AST]]] = {}
    for mod, path in paths.items():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                node.body = []
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    node.lazy = True
        found = out.setdefault(mod, [])
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [(a.name, None, node) for a in node.names if a.name in paths]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        pkg = pkg.rpartition(".")[0]
                    base = f"{pkg}.{base}" if base else pkg
                for a in node.names:
                    if f"{base}.{a.name}" in paths:
                        found.append((f"{base}.{a.name}", None, node))
                    elif base in paths:
                        found.append((base, a.name, node))
    return out


def loops(graph: dict[str, list[tuple[str, str | None, ast.AST]]], lazy: bool = False) -> list[list[str]]:
    """The import loops: strongly connected components of more than one module (Tarjan's algorithm), through
    module-level imports, or with `lazy` through imports inside functions too. The top package's `__init__`
    gathers every chapter's modules: edges into it are left out, or everything is one loop through it."""
    edges = {m: sorted({t for t, _, n in found if t not in PACKAGES and (lazy or not getattr(n, "lazy", False))
                        and (m, t) not in LAZY_BACK_EDGES}) for m, found in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while not comp or comp[-1] != v:
                comp.append(stack.pop())
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def private_uses(root: Path, graph) -> list[str]:
    """`from m import _name`, and `m._name` where m names another module of the packages."""
    bad = []
    for mod, found in graph.items():
        for target, name, _ in found:
            if name and name.startswith("_") and not name.startswith("__") and target != mod:
                bad.append(f"{mod}: from {target} import {name}")
        bound = {}  # local names bound to a module of the packages
        for target, name, node in found:
            if name is None:
                alias = next((a for a in node.names if target.endswith(a.name)), None)
                if alias is not None:
                    bound[alias.asname or alias.name.split(".")[0] if isinstance(node, ast.Import) else
                          alias.asname or alias.name] = target
        path = next(p for p in [root / (mod.replace(".", "/") + ".py"), root / mod.replace(".", "/") / "__init__.py"]
                    if p.exists())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound \
                    and node.attr.startswith("_") and not node.attr.startswith("__"):
                bad.append(f"{mod}: {node.value.id}.{node.attr}")
    return bad


JUDGES_INSIDE = {"autograder.judges.compiler"}  # exercise 10's judge grades the compiler's own pieces: like the tests,
                                               # it builds graphs and items and calls the passes and fusion rules


def into_compiler(graph) -> list[str]:
    return [f"{mod} imports {target}" for mod, found in graph.items() for target, _, _ in found
            if not mod.startswith("teenygrad.compiler") and mod not in JUDGES_INSIDE
            and target.startswith("teenygrad.compiler.")]


def test_the_compiler_is_reached_only_through_its_init():
    graph = imports(REPO)
    assert "teenygrad.compiler.schedule.fusion" in graph  # (it is a package, and its modules are read)
    assert into_compiler(graph) == []


def test_the_only_import_loop_is_tensor_and_the_op_layer():
    graph = imports(REPO)
    for lazy in (False, True):
        found = loops(graph, lazy)
        assert len(found) == 1, found
        assert ALLOWED_LOOP in found[0] and all(m == ALLOWED_LOOP or m.startswith("teenygrad.ops.") for m in found[0]), \
            found


def test_no_module_imports_another_modules_underscore_names():
    assert private_uses(REPO, imports(REPO)) == []


def test_the_checks_catch_what_they_look_for(tmp_path):
    files = {
        "teenygrad/__init__.py": "from teenygrad import a\n",
        "teenygrad/a.py": "def f():\n    from teenygrad.b import g\n",                # a lazy import: still a loop
        "teenygrad/b.py": "from teenygrad import a\nfrom teenygrad.c import _hidden\ng = a.f\n",
        "teenygrad/c.py": "from teenygrad import d\n_hidden = 1\nx = d._private\n",
        "teenygrad/d.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from teenygrad import e\n",
        "teenygrad/e.py": "from teenygrad import d\nfrom teenygrad.compiler.ir import Node\n",
        "teenygrad/compiler/__init__.py": "", "teenygrad/compiler/ir.py": "Node = object\n",
        "autograder/__init__.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = imports(tmp_path)
    assert loops(graph) == [] and loops(graph, lazy=True) == [["teenygrad.a", "teenygrad.b"]]  # (d <-> e: typing)
    assert sorted(private_uses(tmp_path, graph)) == ["teenygrad.b: from teenygrad.c import _hidden",
                                                     "teenygrad.c: d._private"]
    assert into_compiler(graph) == ["teenygrad.e imports teenygrad.compiler.ir"]


def test_teenygrads_init_lists_every_module_by_chapter():
    doc = (REPO / "teenygrad" / "__init__.py").read_text().split('"""')[1]
    listed = set(doc.replace(",", " ").replace("/", " ").split())
    modules = {p.stem if p.is_file() else p.name for p in (REPO / "teenygrad").iterdir()
               if (p.suffix == ".py" or (p / "__init__.py").exists()) and p.name not in ("__init__.py", "__main__.py")}
    assert "compiler" in modules and not modules - listed, f"not in teenygrad/__init__'s table: {modules - listed}"


def test_tests_are_named_by_chapter_or_subject_and_marked_by_chapter():
    import re
    import subprocess
    import sys

    names = sorted(p.name for p in (REPO / "tests").glob("test_*.py"))
    assert not [n for n in names if re.match(r"test_chapter|test_ch\d(?!\d)", n)], names  # one scheme: test_chNN_
    chapters = {n for n in names if re.match(r"test_ch\d\d_[a-z0-9_]+\.py$", n)}
    assert {int(n[7:9]) for n in chapters} == {int(p.name[:2]) for p in (REPO / "chapters").glob("[0-9][0-9]-*.ipynb")}  # one a chapter
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p",
                           "no:cacheprovider", "-m", "ch10", "tests"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    files = {line.split("::")[0].removeprefix("tests/") for line in proc.stdout.splitlines() if "::" in line}
    assert files == {n for n in chapters if n.startswith("test_ch10_")}, proc.stdout[-2000:] + proc.stderr[-2000:]
