"""The capstone: chapter 9's GPTs trained on the learner's own teenygrad, graded by the loss they reach.

`python -m autograder capstone` (`make capstone`):

1. **The learner's pieces.** Every piece recorded in mine/ by `check` (autograder/mine.py), or, for an
   instructor (`--course DIR --learner ID`), every part that scored full marks in the learner's graded
   submissions, recorded the same way into a fresh folder.
2. **The training, in the grading sandbox.** `sandboxed/capstone_training.py` runs in a sandbox like a graded notebook's
   (the learner's pieces are untrusted code): it installs the pieces (`teenygrad.edition.load_mine`), then
   trains the names GPT and the Shakespeare GPT exactly as chapter 9 does, and hands back their trained
   parameters.
3. **The loss is the grader's.** The held-out losses are computed here, by a numpy forward pass in float64
   (autograder/judges/capstone.py) on the chapter's held-out data: nothing the learner's process says about
   its loss counts.
4. **The compiled step.** Chapter 10's check: two copies of one model trained side by side from the same weights,
   on the same batches, one by the eager step and one through `tg.compile` (on the learner's passes, fusion rules
   and code generation when mine/ has them). The grader computes both copies' held-out losses; they must agree
   to within `TWIN_TOLERANCE`, what float32 rounding leaves after those steps.
5. **Points** (10): 3 if the names GPT's held-out loss is within its band, 3 if the Shakespeare GPT's
   validation loss is within its band, 2 if the compiled twin's loss equals the eager twin's, and 2 x the share
   of teenygrad's pieces that are the learner's, weighed by their code lines (`teenygrad.edition.code_lines`):
   writing the backward walk counts for more than a one-line rule. Full marks need every piece to be yours,
   both losses in the book's band and the compiled step right. The report also shows text the two GPTs
   sample (through the learner's `draw` when mine/ has it): not graded, but worth a look.

Two forms. The full form is chapter 9's runs (1000 names steps, 2000 Shakespeare steps: about 10 minutes on
2 cores) and the first 100 steps of the Shakespeare run twice, eager and compiled (a minute or two more, most of it
numba compiling the step's kernels); its bands are the chapter's figures +- 0.05.
`--quick` trains Shakespeare for 30 steps (warmup 10), checks it on 10 of the 50 validation batches, and compiles
the 30 steps of a one-layer, 32-wide model of the same recipe (about a minute and a half, for the test suite); its
bands were measured the same way with the book's pieces.
"""
from __future__ import annotations

import ast
import contextlib
import json
import shutil
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat
import numpy as np

from autograder import caches, mine, sandbox
from autograder.judges import capstone as judge
from autograder.results import Result
from autograder.sandbox import Limits
from teenygrad import edition

POINTS = {"names": 3.0, "shakespeare": 3.0, "compiled": 2.0, "pieces": 2.0}
TWIN_TOLERANCE = 1e-3  # |compiled twin's held-out loss - eager twin's|: float32 rounding leaves ~1e-5 after 100 steps


@dataclass(frozen=True)
class Form:
    names_steps: int
    shakespeare_steps: int
    warmup: int
    val_batches: int
    names_loss: float        # the book's pieces reach this (held-out, nats per character)...
    shakespeare_loss: float
    tolerance: float         # ...and a loss within this of it is in the band
    wall_seconds: int
    twin_steps: int          # the compiled-step check: this many steps of the Shakespeare recipe...
    twin_model: str          # ...on this model (judges/capstone.py twin_cfg)


FORMS = {
    # chapter 9's figures (tests/test_ch09_gpt.py FULL_NAMES_LOSS, FULL_VAL_LOSS; the book build measures them)
    "full": Form(names_steps=1000, shakespeare_steps=2000, warmup=100, val_batches=50,
                 names_loss=2.436, shakespeare_loss=1.745, tolerance=0.05, wall_seconds=3600, twin_steps=100,
                 twin_model="shakespeare"),
    # measured with the book's pieces by this command (tests/test_capstone.py checks it still holds)
    "quick": Form(names_steps=1000, shakespeare_steps=30, warmup=10, val_batches=10,
                  names_loss=2.436, shakespeare_loss=2.857, tolerance=0.05, wall_seconds=900, twin_steps=30,
                  twin_model="small"),
}


@dataclass
class Row:
    assignment: str
    part: str
    piece: str   # module.qualname
    whose: str   # "yours" or "the book's"
    lines: int = 0  # code lines of its body: its weight in the pieces' points
    calls: int = 0
    note: str = ""


@dataclass
class Report:
    form: str
    rows: list[Row] = field(default_factory=list)
    names_loss: float | None = None
    shakespeare_loss: float | None = None
    twin_losses: dict[str, float] = field(default_factory=dict)  # held-out loss of the eager and compiled twins
    samples: dict[str, object] = field(default_factory=dict)     # what the run says its GPTs wrote (not graded)
    points: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    isolation: str = ""

    @property
    def score(self) -> float:
        return sum(self.points.values())

    def to_json(self) -> dict:
        return {**asdict(self), "score": self.score, "max_score": sum(POINTS.values())}


# ---- which pieces are the learner's ------------------------------------------------------------------------------

def recorded_parts(folder: Path) -> dict[tuple[str, str], str]:
    """{(assignment, part): ""} for every part a mine file lists and defines; a part it lists but cannot
    provide maps to why not. Read from the files' text: nothing of the learner's runs here."""
    found: dict[tuple[str, str], str] = {}
    for path in sorted(folder.glob("[0-9][0-9]-*.py")) if folder.is_dir() else []:
        try:
            tree = ast.parse(path.read_text(errors="replace"))
        except SyntaxError as e:
            for part in edition.parts(path.stem):
                found[(path.stem, part)] = f"{path.name} is not Python (line {e.lineno})"
            continue
        listed = next((ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                       and any(getattr(t, "id", None) == "PARTS" for t in node.targets)), [])
        defined = mine.top_level_names(ast.unparse(tree))
        for part, pieces in edition.parts(path.stem).items():
            if part in listed:
                missing = [p.qualname for p in pieces if not defined & set(p.spellings)]
                found[(path.stem, part)] = f"{path.name} does not define {', '.join(missing)}" if missing else ""
    return found


def mine_from_course(course_root: Path, learner: str, dest: Path) -> list[str]:
    """Record in `dest` every part that scored full marks in `learner`'s graded submissions; the lines saying what."""
    lines = []
    folders = sorted((course_root / "autograded" / learner).glob("[0-9][0-9]-*"))
    if not folders:
        raise FileNotFoundError(f"no graded submissions of learner {learner!r} in {course_root / 'autograded'} "
                                "(grade them first: python -m autograder grade ASSIGNMENT --course DIR)")
    for folder in folders:
        result_file, notebook = folder / "result.json", folder / f"{folder.name}.ipynb"
        if not (result_file.exists() and notebook.exists()):
            continue
        result = Result.from_json(json.loads(result_file.read_text()))
        passed = [p.name for p in result.parts if p.max_score > 0 and p.score >= p.max_score]
        failed = [p.name for p in result.parts if p.name not in passed]
        nb = nbformat.read(notebook, as_version=4)
        lines.append(mine.record(nb, folder.name, passed, failed, dest, origin=f"{learner}'s {folder.name}").line())
    return lines


# ---- the run in the sandbox ----------------------------------------------------------------------------------------

def _last_line(log: Path) -> str:
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def _load_npz(path: Path) -> dict[str, np.ndarray] | None:
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError):
        return None


def train_in_sandbox(folder: Path, form: Form, log=print) -> tuple[dict, dict[str, dict], str, dict]:
    """Run sandboxed/capstone_training.py on the pieces in `folder`, in a sandbox.

    Returns (what the run reported, {"names"/"shakespeare": trained parameters}, why it stopped or "",
    the sandbox's status)."""
    limits = Limits(wall_seconds=form.wall_seconds, cell_seconds=form.wall_seconds)
    cache = caches.numba_cache(log=log)
    sandbox.private_mounts()  # the tmpfs work folder vanishes with this process
    with tempfile.TemporaryDirectory(prefix="teenygrad-capstone-") as tmp, contextlib.ExitStack() as mounts:
        box = sandbox.prepare(Path(tmp), {}, limits, str(cache) if cache else None, name="capstone", kernel=False)
        mounts.callback(sandbox.unmount, box.work)
        mounts.callback(sandbox.unmount, box.work / "grading")
        work = box.work
        (work / "mine").mkdir()
        for path in sorted(folder.glob("[0-9][0-9]-*.py")) if folder.is_dir() else []:
            shutil.copyfile(path, work / "mine" / path.name)
        sandbox.give_to(work / "mine", box.spec["uid"])
        config = {"mine": str(work / "mine"), "out": str(work / "out"), "names_steps": form.names_steps,
                  "shakespeare_steps": form.shakespeare_steps, "warmup": form.warmup, "twin_steps": form.twin_steps,
                  "twin_model": form.twin_model}
        log_file = work / ".capstone.log"
        with open(log_file, "wb") as err:
            proc = sandbox.start_program(box, "capstone_training", config,
                                         files={"judge_data.py": Path(judge.__file__)},  # the data and configs
                                         stdin=subprocess.DEVNULL, stdout=err, stderr=err, cwd=work)
            try:
                proc.wait(timeout=form.wall_seconds + 120)
            except subprocess.TimeoutExpired:  # the wrapper enforces the wall clock; this is its backstop
                proc.terminate()
                proc.wait()
        sandbox.sweep(box.spec)
        status = box.status()
        why = ""
        if status.get("outcome") == "timeout":
            why = f"the training ran past the {form.wall_seconds} s limit and was stopped"
        elif status.get("outcome") == "memory":
            why = f"the training used more than {limits.memory_bytes / 2**30:g} GiB of memory and was stopped"
        elif status.get("outcome") == "disk":
            why = "the training wrote too much into its folder and was stopped"
        elif status.get("exit_code"):
            why = f"the training stopped with an error: {_last_line(log_file) or 'no message'}"
        try:
            reported = json.loads((work / "out" / "run.json").read_text())
            if not isinstance(reported, dict):
                reported = {}
        except (OSError, ValueError):
            reported = {}
        trained = {name: params for name in ("names", "shakespeare", "twin_eager", "twin_compiled")
                   if (params := _load_npz(work / "out" / f"{name}.npz")) is not None}
    return reported, trained, why, status


# ---- grading ---------------------------------------------------------------------------------------------------------

def grade(folder: Path, form_name: str = "full", log=print) -> Report:
    """Train on the pieces in `folder` (a mine/ folder) and grade the result (see the module docstring)."""
    form = FORMS[form_name]
    report = Report(form_name)
    recorded = recorded_parts(folder)
    reported, trained, why, status = train_in_sandbox(folder, form, log)
    report.isolation = status.get("isolation", "")
    report.seconds = {k: float(v) for k, v in (reported.get("seconds") or {}).items()
                      if isinstance(v, (int, float))}
    if why:
        report.problems.append(why)
    installed = {tuple(p) for p in reported.get("installed", []) if isinstance(p, list) and len(p) == 2}
    calls = reported.get("calls") if isinstance(reported.get("calls"), dict) else {}
    for p in edition.pieces():
        key = (p.assignment, p.part)
        row = Row(p.assignment, p.part, f"{p.module}.{p.qualname}", "the book's", p.lines)
        if key in recorded and not recorded[key] and key in installed:
            row.whose, row.calls = "yours", int(calls.get(f"{p.assignment}/{p.part}", 0) or 0)
        elif key in recorded:
            row.note = recorded[key] or "in mine/, but it did not load in the run (see the message above)"
        report.rows.append(row)
    if recorded and not installed and not why:
        report.problems.append("none of your pieces loaded in the run (a mine/ file failed to load?)")

    names, shakespeare = judge.names_data(), judge.shakespeare_data()
    cfg = judge.shakespeare_cfg(len(shakespeare.chars))
    for name, params, cfg_, loss_of in (
            ("names", trained.get("names"), judge.NAMES_CFG, lambda p: judge.names_loss(p, names.test)),
            ("shakespeare", trained.get("shakespeare"), cfg,
             lambda p: judge.shakespeare_loss(p, judge.val_batches(shakespeare.val, form.val_batches), cfg))):
        if params is None:
            if not why:
                report.problems.append(f"the {name} GPT's trained parameters did not come back")
            continue
        problem = judge.check_parameters(params, cfg_)
        if problem:
            report.problems.append(f"{name} GPT: {problem}")
            continue
        setattr(report, f"{name}_loss", loss_of(params))
    for name in ("names", "shakespeare"):
        loss, target = getattr(report, f"{name}_loss"), getattr(form, f"{name}_loss")
        ok = loss is not None and abs(loss - target) <= form.tolerance
        report.points[name] = POINTS[name] if ok else 0.0
    grade_twins(report, trained, form, shakespeare, why)
    report.samples = readable_samples(reported.get("samples"))
    total = sum(r.lines for r in report.rows)
    yours = sum(r.lines for r in report.rows if r.whose == "yours")
    report.points["pieces"] = round(POINTS["pieces"] * yours / total, 2) if total else 0.0
    return report


def grade_twins(report: Report, trained: dict, form: Form, shakespeare, why: str) -> None:
    """The compiled-step point: both twins' parameters came back, and their held-out losses (the grader's numpy
    forward pass) agree to within TWIN_TOLERANCE."""
    cfg = judge.twin_cfg(len(shakespeare.chars), form.twin_model)
    batches = judge.val_batches(shakespeare.val, form.val_batches)
    for name in ("eager", "compiled"):
        params = trained.get(f"twin_{name}")
        problem = "its parameters did not come back" if params is None else judge.check_parameters(params, cfg)
        if problem:
            if params is not None or not why:
                report.problems.append(f"the {name} twin (compiled-step check): {problem}")
            continue
        report.twin_losses[name] = judge.shakespeare_loss(params, batches, cfg)
    losses = report.twin_losses
    agree = len(losses) == 2 and abs(losses["compiled"] - losses["eager"]) <= TWIN_TOLERANCE
    if len(losses) == 2 and not agree:
        report.problems.append(f"the compiled step trained its twin to a held-out loss of {losses['compiled']:.5f}, "
                               f"the eager step to {losses['eager']:.5f}: more apart than rounding "
                               f"({TWIN_TOLERANCE:g}); compare their losses step by step (chapter 10's twins)")
    report.points["compiled"] = POINTS["compiled"] if agree else 0.0


def readable_samples(samples: object) -> dict[str, object]:
    """The samples the run reported, kept only as short printable text: it comes from the learner's process."""
    def clean(text: object) -> str:
        return "".join(c if c.isprintable() or c == "\n" else "?" for c in str(text)[:400])
    if not isinstance(samples, dict):
        return {}
    out: dict[str, object] = {}
    if isinstance(samples.get("names"), list):
        out["names"] = [clean(name)[:40] for name in samples["names"][:8]]
    if "shakespeare" in samples:
        out["shakespeare"] = clean(samples["shakespeare"])
    return out


def print_report(report: Report) -> None:
    form = FORMS[report.form]
    print(f"Capstone ({report.form} form): chapter 9's GPTs trained on your teenygrad")
    if report.rows:
        width = [max(len(getattr(r, a)) for r in report.rows) for a in ("assignment", "part", "piece")]
        print(f"  {'exercise':<{width[0]}}  {'part':<{width[1]}}  {'piece':<{width[2]}}  whose       lines  calls")
        for r in report.rows:
            calls = str(r.calls) if r.whose == "yours" else ""
            note = f"  ({r.note})" if r.note else ""
            print(f"  {r.assignment:<{width[0]}}  {r.part:<{width[1]}}  {r.piece:<{width[2]}}  {r.whose:<10}  "
                  f"{r.lines:>5}  {calls:>5}{note}")
    yours = sum(r.whose == "yours" for r in report.rows)
    lines, total = sum(r.lines for r in report.rows if r.whose == "yours"), sum(r.lines for r in report.rows)
    print(f"  {yours} of {len(report.rows)} pieces are yours ({lines} of their {total} code lines); the rest are the "
          "book's.")
    print()
    band = lambda target: f"{target - form.tolerance:.3f} .. {target + form.tolerance:.3f}"  # noqa: E731
    loss = lambda v: "-" if v is None else f"{v:.4f}"  # noqa: E731
    print(f"  {'':<38} {'held-out loss':>13}  {'band (the book)':<16}  points")
    print(f"  {f'names GPT, {form.names_steps} steps':<38} {loss(report.names_loss):>13}  "
          f"{band(form.names_loss):<16}  {report.points['names']:g} / {POINTS['names']:g}")
    print(f"  {f'Shakespeare GPT, {form.shakespeare_steps} steps':<38} {loss(report.shakespeare_loss):>13}  "
          f"{band(form.shakespeare_loss):<16}  {report.points['shakespeare']:g} / {POINTS['shakespeare']:g}")
    twins = report.twin_losses
    agree = f"{twins['compiled']:.4f} vs {twins['eager']:.4f}" if len(twins) == 2 else "-"
    print(f"  {f'compiled twin, {form.twin_steps} steps':<38} {agree:>13}  {f'within {TWIN_TOLERANCE:g}':<16}  "
          f"{report.points['compiled']:g} / {POINTS['compiled']:g}")
    print(f"  {'your pieces (by code lines)':<38} {f'{lines} of {total}':>13}  {'':<16}  "
          f"{report.points['pieces']:g} / {POINTS['pieces']:g}")
    print(f"  {'total':<38} {'':>13}  {'':<16}  {report.score:g} / {sum(POINTS.values()):g}")
    for problem in report.problems:
        print(f"  problem: {problem}")
    if report.samples.get("names"):
        print("  names your GPT made up: " + ", ".join(report.samples["names"]))
    if report.samples.get("shakespeare"):
        print("  your Shakespeare GPT writes:\n    " + str(report.samples["shakespeare"]).replace("\n", "\n    "))
    if report.seconds:
        print("  training time: " + ", ".join(f"{k} {v:.0f} s" for k, v in report.seconds.items()))
