"""The autograder's command line: `python -m autograder COMMAND --help`.

Learner:     check NOTEBOOK                 grade one notebook, print points per part, write feedback HTML,
                                            record the passed parts' code in mine/ (--no-mine: don't)
             capstone [--quick]             train the GPT on your pieces (mine/), graded by the loss reached
Instructor:  setup ASSIGNMENT               prepare a course folder (and nbgrader's exchange config)
             collect SOURCE -a ASSIGNMENT   take a class's submissions (folders or a platform's zip)
             grade ASSIGNMENT [--jobs N]     grade them all (resumes; --force regrades)
             feedback ASSIGNMENT            write per-learner feedback HTML
             export [ASSIGNMENT]            grades as CSV
Authors:     release                        regenerate exercises/ from solutions/
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

from autograder import course
from autograder.notebooks import BadNotebookError, read_notebook


def _known(assignment: str) -> str:
    if assignment not in course.assignments():
        raise BadNotebookError(f"unknown assignment {assignment!r}; known: {', '.join(course.assignments())}")
    return assignment


def _print_table(result) -> None:
    print(f"{course.assignment_title(result.assignment)}  ({result.assignment})")
    width = max([len(p.name) for p in result.parts] + [5])
    print(f"  {'part':<{width}}  points  why points were lost")
    for p in result.parts:
        print(f"  {p.name:<{width}}  {p.score:>2g} / {p.max_score:<2g} {p.message}")
    print(f"  {'total':<{width}}  {result.score:>2g} / {result.max_score:<2g}")
    if result.error:
        print(f"  note: {result.error}")
    if result.feedback:
        print(f"Feedback: {result.feedback}")


def cmd_check(args: argparse.Namespace) -> int:
    path = Path(args.notebook)
    nb = read_notebook(path)
    known = course.assignments()
    if args.assignment:
        _known(args.assignment)
    found = course.identify(nb)
    if found is None:
        raise BadNotebookError(f"{path}: not a teenygrad exercise (no graded cells of {', '.join(known)}); "
                          "grade a notebook from exercises/")
    if found not in known:
        raise BadNotebookError(f"{path}: this notebook is assignment {found!r}, which this course does not have "
                          f"(known: {', '.join(known)})")
    if args.assignment and found != args.assignment:
        raise BadNotebookError(f"{path}: this notebook is assignment {found}, not {args.assignment}")
    from autograder import fork_server

    fork_server.start()  # imports what grading needs in the fork server while this process imports the rest
    from autograder import batch, collect, gradebook

    with tempfile.TemporaryDirectory(prefix="teenygrad-check-") as tmp:
        root = Path(tmp)
        collect.store(root, found, "learner", path.name, path.read_bytes(), collect.CollectReport())
        results, _ = batch.grade_all(root, found, progress=False)
        result = results[0]
        pages = [] if args.no_feedback else gradebook.feedback(root, None, found, "learner")
        feedback = Path(args.feedback) if args.feedback else path.with_suffix(".feedback.html")
        if pages:
            feedback.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(pages[0], feedback)
            result.feedback = str(feedback)
        graded = root / "autograded" / "learner" / found / f"{found}.ipynb"
        recorded = "not recorded (--no-mine)" if args.no_mine else _record_mine(graded, result, str(path))
    if args.json:
        print(json.dumps({**{k: v for k, v in result.to_json().items() if k not in ("sha256",)}, "mine": recorded}))
    else:
        _print_table(result)
        print(f"mine: {recorded}")
    return 0


def _record_mine(graded: Path, result, origin: str) -> str:
    """Record the parts that scored full marks in mine/ (autograder/mine.py); the line saying what it holds."""
    from autograder import mine

    passed = [p.name for p in result.parts if p.max_score > 0 and p.score >= p.max_score]
    failed = [p.name for p in result.parts if p.name not in passed]
    try:
        nb = read_notebook(graded)
        return mine.record(nb, result.assignment, passed, failed, origin=origin).line()
    except (OSError, BadNotebookError) as e:  # grading went fine; say why the record did not
        return f"could not record your passed parts in {mine.edition.mine_dir()}: {e}"


def cmd_capstone(args: argparse.Namespace) -> int:
    """Train chapter 9's GPTs on a learner's pieces (mine/, or a course learner's graded parts) and grade them."""
    # the judge's numpy forward pass: one BLAS thread is several times faster than two on a busy 2-core machine
    # (numpy is not imported yet here; the sandboxed training does not inherit this)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from autograder import capstone
    from teenygrad import edition

    log = (lambda m: print(m, file=sys.stderr)) if args.json else print
    with tempfile.TemporaryDirectory(prefix="teenygrad-capstone-mine-") as tmp:
        if args.learner or args.course:
            if not (args.learner and args.course):
                raise BadNotebookError("--course and --learner go together: whose graded work, in which course")
            folder = Path(tmp)
            try:
                for line in capstone.mine_from_course(Path(args.course), args.learner, folder):
                    log(f"mine: {line}")
            except FileNotFoundError as e:
                raise BadNotebookError(str(e)) from None
            if args.keep_mine:  # the learner's mine/, for their hub home (TEENYGRAD=mine)
                keep = Path(args.keep_mine)
                if keep.exists() and any(keep.iterdir()):
                    raise BadNotebookError(f"{keep} already holds files; give an empty or new folder "
                                           "(nothing is overwritten)")
                shutil.copytree(folder, keep, dirs_exist_ok=True)
                log(f"mine: {args.learner}'s pieces written to {keep}")
        else:
            folder = Path(args.mine) if args.mine else edition.mine_dir()
            if args.mine and not folder.is_dir():
                raise BadNotebookError(f"{folder}: no such folder (the pieces `check` recorded are in "
                                       f"{edition.mine_dir()})")
        if not capstone.recorded_parts(folder):
            log(f"mine: no pieces of yours in {folder} yet: the run uses the book's teenygrad throughout "
                "(`make check NB=...` records the parts you pass)")
        log(f"training chapter 9's GPTs on your pieces in a sandbox ({'quick' if args.quick else 'full'} form)...")
        report = capstone.grade(folder, "quick" if args.quick else "full", log=log)
    if args.json:
        print(json.dumps(report.to_json()))
    else:
        capstone.print_report(report)
    return 0


def cmd_setup(args: argparse.Namespace) -> int:
    from autograder import gradebook

    config = gradebook.setup(Path(args.course), _known(args.assignment), args.db, args.exchange)
    print(f"course ready in {Path(args.course)} ({args.assignment}: source, release, gradebook); "
          f"nbgrader config: {config}")
    return 0


def cmd_collect(args: argparse.Namespace) -> int:
    from autograder import collect

    assignment = _known(args.assignment)
    report = collect.collect(Path(args.source), Path(args.course), assignment)
    print(f"{len(report.new)} new submissions, {len(report.unchanged)} unchanged, {len(report.problems)} problems "
          f"-> {Path(args.course) / 'submitted'}")
    for problem in report.problems:
        print(f"  problem: {problem}")
    return 1 if report.problems and not (report.new or report.unchanged) else 0


def cmd_grade(args: argparse.Namespace) -> int:
    from autograder import fork_server

    fork_server.start()  # as in cmd_check; one server grades every assignment named
    from autograder import batch
    from autograder.sandbox import Limits

    assignments = list(dict.fromkeys(_known(a) for a in args.assignment))
    root = Path(args.course)
    for assignment in assignments:  # all checked before any grading starts
        if not batch.submissions(root, assignment):
            raise BadNotebookError(f"no submissions of {assignment} in {root / 'submitted'}: run `collect` first")
    limits = Limits()
    if args.timeout:
        limits.wall_seconds = args.timeout
    if args.cell_timeout:
        limits.cell_seconds = args.cell_timeout
    limits.cell_seconds = min(limits.cell_seconds, limits.wall_seconds)
    graded = skipped = 0
    for assignment in assignments:
        results, passed_over = batch.grade_all(root, assignment, args.db, jobs=args.jobs, force=args.force,
                                               limits=limits)
        graded, skipped = graded + len(results), skipped + len(passed_over)
        width = max([len(r.student) for r in results] + [7])
        if results:
            if len(assignments) > 1:
                print(assignment)
            print(f"{'learner':<{width}}  score    problem")
            for r in results:
                first = r.error or next((f"{p.name}: {p.message}" for p in r.parts if p.message), "")
                print(f"{r.student:<{width}}  {r.score:>3g}/{r.max_score:<3g}  {first[:100]}")
    print(f"graded {graded}, skipped {skipped} already graded (--force regrades them)")
    return 0


def cmd_feedback(args: argparse.Namespace) -> int:
    from autograder import gradebook

    pages = gradebook.feedback(Path(args.course), args.db, _known(args.assignment), args.student)
    print(f"{len(pages)} feedback pages in {Path(args.course) / 'feedback'}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from autograder import gradebook

    assignments = [_known(args.assignment)] if args.assignment else course.assignments()
    if args.out:
        with open(args.out, "w", newline="") as out:
            rows = gradebook.export(Path(args.course), args.db, out, assignments)
        print(f"{rows} rows -> {args.out}")
    else:
        gradebook.export(Path(args.course), args.db, sys.stdout, assignments)
    return 0


def cmd_release(args: argparse.Namespace) -> int:
    """Regenerate exercises/ from solutions/ (nbgrader generate_assignment), or write them to --out."""
    out = Path(args.out) if args.out else course.EXERCISES
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="teenygrad-release-") as tmp:  # one course: its gradebook made once
        for assignment in args.assignments or course.assignments():
            released = course.generate(Path(tmp), _known(assignment))
            shutil.copyfile(released, out / f"{assignment}.ipynb")
            print(out / f"{assignment}.ipynb")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m autograder", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def course_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--course", default="course", help="the nbgrader course directory (default: ./course)")
        p.add_argument("--db", metavar="URL", help="gradebook database URL, any SQLAlchemy URL nbgrader accepts, "
                       "e.g. postgresql://user@host/course (default: sqlite in the course directory)")

    p = sub.add_parser("check", help="grade one notebook and print points per part",
                       description="Grade one learner's notebook with its visible and hidden tests.")
    p.add_argument("notebook", help="the .ipynb file to grade")
    p.add_argument("--assignment", help="which exercise it is (default: read from the notebook)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    page = p.add_mutually_exclusive_group()
    page.add_argument("--feedback", metavar="HTML",
                      help="where to write the feedback (default: NOTEBOOK.feedback.html)")
    page.add_argument("--no-feedback", action="store_true", help="write no feedback page (about 2 s less)")
    p.add_argument("--no-mine", action="store_true", help="do not record the passed parts in mine/ "
                   "(by default their code goes to mine/NN-name.py, which TEENYGRAD=mine runs)")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("capstone", help="train the GPT on your pieces of teenygrad, graded by the loss reached",
                       description="Chapter 9's names GPT and Shakespeare GPT, trained in the grading sandbox with "
                       "every piece recorded in mine/ swapped in; the grader computes the held-out losses itself. "
                       "Points: 4 names GPT in its band, 4 Shakespeare GPT in its band, 2 x the share of pieces "
                       "that are yours.")
    p.add_argument("--quick", action="store_true", help="the short form (about 30 s; the full form takes ~10 min)")
    p.add_argument("--mine", metavar="DIR", help="the pieces to use (default: $TEENYGRAD_MINE, else mine/)")
    p.add_argument("--course", metavar="DIR", help="an instructor's course: use --learner's graded submissions")
    p.add_argument("--learner", metavar="ID", help="with --course: whose pieces (parts with full marks)")
    p.add_argument("--keep-mine", metavar="DIR",
                   help="with --course: also write the learner's pieces to DIR, a mine/ folder for their hub home")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.set_defaults(func=cmd_capstone)

    p = sub.add_parser("setup", help="prepare a course folder for an assignment",
                       description="Create or update a course folder for nbgrader: the assignment's source, "
                       "release and gradebook entry, and an nbgrader_config.py so nbgrader's own commands "
                       "(release_assignment, collect, formgrader) work in it.")
    p.add_argument("assignment")
    p.add_argument("--exchange", metavar="DIR", help="nbgrader exchange folder shared with JupyterHub users")
    course_options(p)
    p.set_defaults(func=cmd_setup)

    p = sub.add_parser("collect", help="take a class's submissions into the course",
                       description="Copy submissions from a folder of per-learner folders or a platform's zip "
                       "export into the course; originals are kept byte for byte, one folder per attempt.")
    p.add_argument("source", help="a folder of per-learner folders, or a .zip")
    p.add_argument("-a", "--assignment", required=True, help="the assignment, e.g. 01-regression")
    course_options(p)
    p.set_defaults(func=cmd_collect)

    p = sub.add_parser("grade", help="grade every collected submission of one or more assignments",
                       description="Grade all submissions in parallel; already graded ones are skipped. Several "
                                   "assignments are graded one after the other by one grader (it starts once).")
    p.add_argument("assignment", nargs="+", help="e.g. 01-regression (or several: 01-regression 02-tensors)")
    p.add_argument("--jobs", "-j", type=int, default=1, help="submissions graded at once (default 1)")
    p.add_argument("--force", action="store_true", help="regrade submissions graded before")
    p.add_argument("--timeout", type=int, help="seconds one notebook may run in all (default 900)")
    p.add_argument("--cell-timeout", type=int, help="seconds one cell may run (default 300)")
    course_options(p)
    p.set_defaults(func=cmd_grade)

    p = sub.add_parser("feedback", help="write per-learner feedback HTML",
                       description="nbgrader generate_feedback for the graded submissions.")
    p.add_argument("assignment")
    p.add_argument("--student", help="only this learner")
    course_options(p)
    p.set_defaults(func=cmd_feedback)

    p = sub.add_parser("export", help="write grades as CSV", description="One row per learner and assignment.")
    p.add_argument("assignment", nargs="?", help="only this assignment")
    p.add_argument("--out", "-o", help="CSV file (default: standard output)")
    course_options(p)
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("release", help="regenerate exercises/ from solutions/",
                       description="Run nbgrader generate_assignment on every solutions notebook.")
    p.add_argument("assignments", nargs="*", help="only these (default: all)")
    p.add_argument("--out", help="write here instead of exercises/")
    p.set_defaults(func=cmd_release)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # nbgrader 0.9 predates SQLAlchemy 2.1's stricter session rules; its warnings are not the user's concern
    warnings.filterwarnings("ignore", module="nbgrader")
    warnings.filterwarnings("ignore", message=".*not in session.*")
    try:
        return args.func(args)
    except BadNotebookError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as e:  # a --db URL whose driver is not installed
        print(f"error: the gradebook database needs the Python module {e.name!r}, which is not installed; "
              "for PostgreSQL use a URL like postgresql+psycopg2://user@host/course", file=sys.stderr)
        return 2
    except Exception as e:
        if type(e).__module__.startswith("sqlalchemy"):
            first = str(e).strip().splitlines()[0][:300]
            print(f"error: cannot use the gradebook database ({args.db or 'sqlite in the course folder'}): {first}",
                  file=sys.stderr)
            return 2
        raise
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
