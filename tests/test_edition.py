"""The learner's edition (teenygrad/edition.py): marked pieces, stubs, installing a learner's function, and
the pasted answers tests/test_autograder_parts.py grades (they must score 0)."""
from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

import teenygrad as tg
from autograder import course, judges
from teenygrad import edition

REPO = Path(__file__).resolve().parent.parent
PASTED = Path(__file__).resolve().parent / "pasted"

FAKE = textwrap.dedent('''
    """A module with marked and unmarked functions."""
    from teenygrad.edition import exercise

    K = 3


    def helper(x):
        return x + K


    @exercise("07-fake", "double")
    def double(x: int,
               y: int = 0) -> int:
        """Twice x, plus y."""
        z = 2 * x
        return z + y


    @exercise("07-fake", "triple")
    def triple(x): return 3 * x


    @exercise("07-fake", "double", kernel=True)
    def double_kernel(x, out):
        """out[i] = 2 x[i]."""
        for i in range(len(x)):
            out[i] = 2 * x[i]


    class Layer:
        def __init__(self, w):
            self.w = w

        @exercise("08-other", "forward")
        def forward(self, x):
            """w times x."""
            if x is None:
                return None
            return self.w * x

        def unmarked(self):
            return self.w
''')


def _load(source: str, name: str):
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, name, "exec"), module.__dict__)
    return module


def _strip_marked(tree: ast.AST) -> str:
    """The module's source with every marked function's body removed: what a stub must leave unchanged."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any(isinstance(d, ast.Call) for d in node.decorator_list):
            node.body = [ast.Pass()]
    return ast.dump(tree)


def test_stubs_replace_only_marked_bodies_and_keep_the_contract():
    stubbed = edition.stubbed_source(FAKE)
    assert _strip_marked(ast.parse(stubbed)) == _strip_marked(ast.parse(FAKE))
    book, learner = _load(FAKE, "book_fake"), _load(stubbed, "learner_fake")
    assert book.double(4, 1) == 9 and book.Layer(2).forward(5) == 10
    assert learner.helper(1) == book.helper(1) and learner.Layer(2).unmarked() == 2
    for call, (assignment, part) in [(lambda: learner.double(4), ("07-fake", "double")),
                                     (lambda: learner.triple(4), ("07-fake", "triple")),
                                     (lambda: learner.Layer(2).forward(5), ("08-other", "forward"))]:
        with pytest.raises(NotImplementedError, match=f"exercise {assignment}, part '{part}'"):
            call()
    assert learner.double.__doc__ == "Twice x, plus y." and "y: int = 0" in stubbed  # the contract stays
    assert "z = 2 * x" not in stubbed and "3 * x" not in stubbed and "self.w * x" not in stubbed
    assert "out[i] = 2 * x[i]" not in stubbed
    out = [0]
    book.double_kernel([4], out)
    assert out == [8]
    with pytest.raises(NotImplementedError, match="part 'double'"):
        learner.double_kernel([4], out)


def test_a_stub_replaces_a_kernel_made_inside_its_piece_decorators_and_all():
    """A piece whose body starts with a decorated function (a kernel factory: exercise 11's tiled kernel, compiled
    for one tile size) is stubbed from its first decorator, so the learner's edition still parses."""
    source = ('import functools\n\n\ndef exercise(*a, **k):\n    return lambda f: f\n\n\n'
              '@exercise("11-fake", "tiled", kernel=True)\n@functools.cache\ndef make(tile):\n    """The kernel."""\n'
              '    @functools.cache\n    @functools.wraps(len)\n    def kernel(x):\n        return x * tile\n    return kernel\n')
    stubbed = edition.stubbed_source(source)
    with pytest.raises(NotImplementedError, match="part 'tiled'"):
        _load(stubbed, "factory_fake").make(2)
    assert "x * tile" not in stubbed and '"""The kernel."""' in stubbed


def test_stubs_of_one_exercise_leave_the_others():
    stubbed = edition.stubbed_source(FAKE, frozenset(["08-other"]))
    learner = _load(stubbed, "learner_fake_08")
    assert learner.double(4, 1) == 9 and learner.triple(2) == 6
    with pytest.raises(NotImplementedError, match="08-other"):
        learner.Layer(2).forward(5)


def test_build_learner_copies_unmarked_files_untouched(tmp_path):
    package = tmp_path / "src" / "teenygrad"
    (package / "sub").mkdir(parents=True)
    (package / "plain.py").write_text("X = 1\n")
    (package / "sub" / "fake.py").write_text(FAKE)
    (package / "data").mkdir()
    (package / "data" / "x.csv").write_text("a,b\n")
    os.utime(package / "plain.py", (1_000_000, 1_000_000))
    out = edition.build_learner(tmp_path / "learner", package=package)
    assert (out / "plain.py").read_text() == "X = 1\n" and (out / "plain.py").stat().st_mtime == 1_000_000
    assert (out / "data" / "x.csv").exists() and (tmp_path / "learner" / "pyproject.toml").exists()
    assert "NotImplementedError" in (out / "sub" / "fake.py").read_text()
    edition.build_learner(tmp_path / "learner", package=package)  # again: replaces, never mixes


def test_the_learner_edition_of_the_package_stubs_every_piece(tmp_path):
    pieces = edition.pieces()
    assert pieces, "no function of teenygrad is marked @exercise"
    edition.build_learner(tmp_path)
    script = textwrap.dedent('''
        import importlib, inspect, json, sys
        import teenygrad
        from teenygrad import edition
        assert teenygrad.__file__.startswith(sys.argv[1]), teenygrad.__file__
        out = []
        for p in edition.pieces():
            obj = importlib.import_module(p.module)
            for name in p.qualname.split("."):
                obj = getattr(obj, name)
            if p.kernel:  # a numba kernel: its Python function (numba compiles the same raise); a CUDA kernel in
                # the simulator, or a function making kernels behind functools.cache: the function it wraps
                obj = getattr(obj, "py_func", None) or getattr(obj, "__wrapped__", obj)
            required = [q for q in inspect.signature(obj).parameters.values() if q.default is q.empty]
            params = [q for q in required if q.kind in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD)]
            keywords = {q.name: None for q in required if q.kind == q.KEYWORD_ONLY}  # batches(..., batch_size)
            try:
                obj(*[None] * len(params), **keywords)
                out.append([p.assignment, p.part, "ran"])
            except NotImplementedError as e:
                out.append([p.assignment, p.part, str(e)])
        print(json.dumps(out))
    ''')
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    env.pop(edition.WITHHOLD_ENV, None)
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path)], env=env, capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(rows) == len(pieces)
    for assignment, part, said in rows:
        assert said.startswith(f"exercise {assignment}, part '{part}'"), (assignment, part, said)


def test_every_exercise_part_is_a_piece_of_the_package():
    """The learner's edition stays in sync with the exercises: each graded part names marked functions."""
    marked = {(p.assignment, p.part) for p in edition.pieces()}
    graded = {(a, part) for a in course.assignments() for part in judges.load(a)}
    assert marked - graded == set(), "marked pieces that no exercise grades"
    assert graded - marked == set(), "graded parts with no piece in teenygrad (mark it with @exercise)"


def test_every_piece_states_its_contract():
    for p in edition.pieces():
        tree = ast.parse(p.path.read_text())
        node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.lineno == p.line)
        assert ast.get_docstring(node), f"{p.module}.{p.qualname} (a piece of {p.assignment}) has no docstring"


def _first_piece() -> edition.Piece:
    return next(p for p in edition.pieces() if not p.kernel)


def test_install_puts_the_learners_function_in_and_refuses_the_books():
    piece = _first_piece()
    obj = __import__(piece.module, fromlist=["x"])
    for name in piece.qualname.split("."):
        obj = getattr(obj, name)
    calls = []

    def mine(*args, **kwargs):
        calls.append(args)
        return "mine"

    mine.__name__ = piece.name
    siblings = [p for p in edition.pieces() if (p.assignment, p.part) == (piece.assignment, piece.part)
                and not p.kernel]
    others = []
    for p in siblings[1:]:
        def other(*args, **kwargs):
            return "other"
        other.__name__ = p.name
        others.append(other)
    with edition.installed(piece.assignment, piece.part, mine, *others):
        assert obj(*[None] * 8) == "mine" and calls  # the package's own name now runs the learner's function
        assert edition.is_mine(piece.assignment, piece.part)
    assert not edition.is_mine(piece.assignment, piece.part)
    with pytest.raises(ValueError, match="teenygrad's own piece"):
        edition.install(piece.assignment, piece.part, obj)
    wrong = lambda: None  # noqa: E731
    with pytest.raises(ValueError, match="same name"):
        edition.install(piece.assignment, piece.part, wrong)
    with pytest.raises(KeyError, match="no part"):
        edition.install(piece.assignment, "no-such-part", mine)


def test_withholding_makes_the_pieces_raise(tmp_path):
    piece = _first_piece()
    script = textwrap.dedent(f'''
        import importlib
        obj = importlib.import_module({piece.module!r})
        for name in {piece.qualname!r}.split("."):
            obj = getattr(obj, name)
        try:
            obj(*[None] * 8)
        except NotImplementedError as e:
            print("withheld:", e)
        except Exception as e:
            print("ran:", type(e).__name__)
    ''')
    env = {**os.environ, edition.WITHHOLD_ENV: piece.assignment}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.stdout.startswith(f"withheld: exercise {piece.assignment}, part '{piece.part}'"), out.stderr[-2000:]


def test_the_table_lists_every_piece():
    rows = edition.table()
    assert len(rows) == len(edition.pieces())
    assert all(whose == "the book's" or whose.endswith(".py") or whose == "this process" for *_, whose in rows)


def test_exercises_state_their_expected_time():
    hours = []
    for assignment in course.assignments():
        first = nbformat.read(course.EXERCISES / f"{assignment}.ipynb", as_version=4).cells[0].source
        line = next((s for s in first.splitlines() if s.startswith("Expected time: about ")), None)
        assert line, f"{assignment}: the first cell must say 'Expected time: about N hours.'"
        hours.append(float(line.split("about ")[1].split()[0]))
    # one ramp over the first ten, since exercises 1-10 were rewritten to the weight of a course (issues 34 and 35);
    # exercise 11 (GPU kernels, issue 36: three parts on a new machine model) states its own estimate after them
    ramp = hours[:10]
    assert ramp == sorted(ramp), f"the ramp: expected times must not fall from one exercise to the next: {ramp}"
    assert ramp[0] <= 1.5 and ramp[-1] >= 2 and all(h >= 2 for h in hours[10:])


def test_every_assignment_has_its_pasted_answers():
    """tests/test_autograder_parts.py grades these (half of each partly solved notebook): each must score 0."""
    assert sorted(p.stem.replace("_", "-") for p in PASTED.glob("[0-9][0-9]_*.py")) == course.assignments()


def test_loading_mine_installs_the_learners_pieces(tmp_path):
    piece = _first_piece()
    names = [p.name for p in edition.pieces() if (p.assignment, p.part) == (piece.assignment, piece.part)
             and not p.kernel]
    code = "\n".join(f"def {n}(*args, **kwargs):\n    return 'mine'\n" for n in names)
    (tmp_path / f"{piece.assignment}.py").write_text(f"{code}\nPARTS = [{piece.part!r}]\n")
    script = ("from teenygrad import edition\n"
              f"print(edition.is_mine({piece.assignment!r}, {piece.part!r}))")
    env = {**os.environ, edition.EDITION_ENV: "mine", edition.MINE_ENV: str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.stdout.strip() == "True", out.stderr[-2000:]
    env.pop(edition.EDITION_ENV)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.stdout.strip() == "False", "without TEENYGRAD=mine, importing teenygrad must not load mine/"


def test_a_method_piece_is_found_in_the_learners_class_of_its_name():
    """The layers' methods share names (`__init__`, `forward`), so a learner writes them in a class of the layer's name:
    mine files, `make check` and the capstone find them there; a top-level function still answers any other piece."""
    from autograder import mine

    linear = {p.qualname: p for p in edition.parts("07-neural-nets")["linear"]}
    namespace: dict = {"__name__": "teenygrad_mine_07_neural_nets"}
    exec("class Linear:\n    def __init__(self, a, b): pass\n    def forward(self, x): return x\n\n"
         "def forward(x): return 'top level'\n\ndef linear_backward(ctx, g): return g\n", namespace)
    assert edition.learners_function(namespace, linear["Linear.forward"]) is vars(namespace["Linear"])["forward"]
    assert edition.learners_function(namespace, linear["linear_backward"]) is namespace["linear_backward"]
    assert edition.learners_function({"Linear": tg.nn.Linear}, linear["Linear.forward"]) is None  # teenygrad's own
    step = next(p for p in edition.parts("07-neural-nets")["optimizer"] if p.name == "step")
    assert edition.learners_function({"step": len}, step) is len  # a method written as a top-level function
    names = mine.top_level_names("class Linear:\n    def __init__(self): pass\n\ndef linear_backward(ctx, g): pass\n")
    assert all(set(p.spellings) & names for qualname, p in linear.items() if qualname != "Linear.forward")
    assert not set(linear["Linear.forward"].spellings) & names


def test_importing_teenygrad_installs_nothing():
    assert not any(edition.is_mine(p.assignment, p.part) for p in edition.pieces()) or os.environ.get("TEENYGRAD")
    assert tg.edition is edition
