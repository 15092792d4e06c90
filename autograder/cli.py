"""The autograder's command line: `python -m autograder COMMAND --help`.

    check NOTEBOOK        grade one notebook (a learner checking their own work)
    release               regenerate exercises/ from solutions/ with nbgrader
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

from autograder import course
from autograder.notebooks import BadNotebook, read_notebook


def _print_table(result) -> None:
    title = course.assignment_title(result.assignment)
    print(f"{title}  ({result.assignment})")
    width = max([len(p.name) for p in result.parts] + [4])
    print(f"  {'part':<{width}}  points  why points were lost")
    for p in result.parts:
        print(f"  {p.name:<{width}}  {p.score:>2g} / {p.max_score:<2g} {p.message}")
    print(f"  {'total':<{width}}  {result.score:>2g} / {result.max_score:<2g}")
    if result.error:
        print(f"  note: {result.error}")
    if result.feedback:
        print(f"Feedback: {result.feedback}")


def cmd_check(args: argparse.Namespace) -> int:
    from autograder.grading import check_notebook

    path = Path(args.notebook)
    nb = read_notebook(path)
    known = course.assignments()
    if args.assignment and args.assignment not in known:
        raise BadNotebook(f"unknown assignment {args.assignment!r}; known: {', '.join(known)}")
    found = course.identify(nb)
    if found is None:
        raise BadNotebook(f"{path}: not a teenygrad exercise (no graded cells of {', '.join(known)}); "
                          "grade a notebook from exercises/")
    if found not in known:
        raise BadNotebook(f"{path}: this notebook is assignment {found!r}, which this course does not have "
                          f"(known: {', '.join(known)})")
    if args.assignment and found != args.assignment:
        raise BadNotebook(f"{path}: this notebook is assignment {found}, not {args.assignment}")
    assignment = found
    feedback = Path(args.feedback) if args.feedback else path.with_suffix(".feedback.html")
    result = check_notebook(nb, assignment, feedback)
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        _print_table(result)
    return 0


def cmd_release(args: argparse.Namespace) -> int:
    """Regenerate exercises/ from solutions/ (nbgrader generate_assignment), or write them to --out."""
    out = Path(args.out) if args.out else course.EXERCISES
    out.mkdir(parents=True, exist_ok=True)
    for assignment in args.assignments or course.assignments():
        with tempfile.TemporaryDirectory(prefix="teenygrad-release-") as tmp:
            released = course.generate(Path(tmp), assignment)
            shutil.copyfile(released, out / f"{assignment}.ipynb")
        print(f"{out / (assignment + '.ipynb')}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m autograder", description="Grade teenygrad exercises with nbgrader.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("check", help="grade one notebook and print points per part",
                       description="Grade one learner's notebook with its visible and hidden tests.")
    p.add_argument("notebook", help="the .ipynb file to grade")
    p.add_argument("--assignment", help="which exercise it is (default: read from the notebook)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    p.add_argument("--feedback", metavar="HTML", help="where to write the feedback (default: NOTEBOOK.feedback.html)")
    p.set_defaults(func=cmd_check)

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
    except BadNotebook as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
