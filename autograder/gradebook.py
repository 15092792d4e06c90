"""The real course's gradebook: only the trusted parent process writes it, one result at a time.

The course directory is nbgrader's (source/, submitted/, autograded/, feedback/, gradebook.db). Next to
each autograded notebook we keep `result.json`: the scores, the reason for each lost point, and the hash
of the submission that was graded, so `grade` can resume and `export` can say why.
"""
from __future__ import annotations

import csv
import datetime as dt
import json
import shutil
import tempfile
from pathlib import Path

from autograder import course
from autograder.results import Result


def db_url_for(root: Path, db_url: str | None) -> str:
    return db_url or f"sqlite:///{(root / 'gradebook.db').resolve()}"


def ensure_assignment(root: Path, assignment: str, db_url: str | None) -> None:
    """Make sure the real course knows the assignment (nbgrader generate_assignment, once)."""
    from nbgrader.api import Gradebook, MissingEntry

    root.mkdir(parents=True, exist_ok=True)
    source = root / "source" / assignment / f"{assignment}.ipynb"
    if db_url is None and not (root / "gradebook.db").exists():
        # a new course: start from the cached generated assignment instead of generating again (checked before
        # the gradebook is opened: opening creates the database, and nbgrader's creation runs alembic, seconds)
        template = course.template(assignment)
        shutil.copytree(template / "source" / assignment, source.parent, dirs_exist_ok=True)
        shutil.copytree(template / "release" / assignment, root / "release" / assignment, dirs_exist_ok=True)
        shutil.copyfile(template / "gradebook.db", root / "gradebook.db")
        return
    with Gradebook(db_url_for(root, db_url), course.COURSE_ID) as gb:
        try:
            gb.find_assignment(assignment)
            known = True
        except MissingEntry:
            known = False
    if known and source.exists():
        if source.read_bytes() != (course.SOLUTIONS / f"{assignment}.ipynb").read_bytes():
            print(f"note: solutions/{assignment}.ipynb changed since this course was set up; "
                  f"grading with the course's copy in {source.parent}")
        return
    course.generate(root, assignment, db_url_for(root, db_url))


NBGRADER_CONFIG = """\
# nbgrader configuration for this course, written by `python -m autograder setup`.
# nbgrader's own commands (release_assignment, collect, formgrader) read it when run from this folder.
c = get_config()
c.CourseDirectory.course_id = {course_id!r}
c.CourseDirectory.root = {root!r}
{db}{exchange}"""


def setup(root: Path, assignment: str, db_url: str | None, exchange: str | None) -> Path:
    """Prepare a course folder for `assignment` and write its nbgrader_config.py."""
    ensure_assignment(root, assignment, db_url)
    config = root / "nbgrader_config.py"
    text = NBGRADER_CONFIG.format(
        course_id=course.COURSE_ID, root=str(root.resolve()),
        db=f"c.CourseDirectory.db_url = {db_url!r}\n" if db_url else "",
        exchange=f"c.Exchange.root = {str(Path(exchange).resolve())!r}\n" if exchange else "")
    if config.exists() and config.read_text() != text:
        backup = config.with_name(f"nbgrader_config.{now_utc().replace(' ', '_').replace(':', '-')}.py")
        shutil.copyfile(config, backup)  # never silently overwritten
    config.write_text(text)
    return config


def result_path(root: Path, student: str, assignment: str) -> Path:
    return root / "autograded" / student / assignment / "result.json"


def load_result(root: Path, student: str, assignment: str) -> Result | None:
    path = result_path(root, student, assignment)
    try:
        return Result.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def record(root: Path, db_url: str | None, result: Result, graded_notebook: Path, timestamp: str) -> None:
    """Write one graded submission into the real course: gradebook scores, autograded notebook, result.json."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url_for(root, db_url), course.COURSE_ID) as gb:
        gb.update_or_create_student(result.student)
        gb.update_or_create_submission(result.assignment, result.student, timestamp=timestamp)
        for part in result.parts:
            grade = gb.find_grade(f"test_{part.name}", result.assignment, result.assignment, result.student)
            grade.auto_score = part.score
        gb.db.commit()
    dest = root / "autograded" / result.student / result.assignment
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(graded_notebook, dest / f"{result.assignment}.ipynb")
    (dest / "timestamp.txt").write_text(timestamp)
    tmp = result_path(root, result.student, result.assignment).with_suffix(".tmp")
    tmp.write_text(json.dumps(result.to_json(), indent=1))
    tmp.replace(result_path(root, result.student, result.assignment))  # all or nothing


def feedback(root: Path, db_url: str | None, assignment: str, student: str | None = None) -> list[Path]:
    """nbgrader generate_feedback for one student or all; the HTML files written."""
    api = course.api(root, db_url_for(root, db_url))
    outcome = api.generate_feedback(assignment, student)
    if not outcome["success"]:
        raise RuntimeError(f"nbgrader generate_feedback failed: {outcome.get('error', '')[-500:]}")
    pattern = f"{student or '*'}/{assignment}/{assignment}.html"
    return sorted((root / "feedback").glob(pattern))


def export(root: Path, db_url: str | None, out, assignments: list[str]) -> int:
    """Write one CSV row per (student, assignment): total, each part's points, and the reasons."""
    from nbgrader.api import Gradebook, MissingEntry

    rows = 0
    writer = csv.writer(out)
    with Gradebook(db_url_for(root, db_url), course.COURSE_ID) as gb:
        writer.writerow(["student", "assignment", "score", "max_score", "parts", "problems", "graded_at"])
        for assignment in assignments:
            for student in sorted(s.id for s in gb.students):
                try:
                    sub = gb.find_submission(assignment, student)
                except MissingEntry:
                    continue
                result = load_result(root, student, assignment)
                parts = "; ".join(f"{p.name} {p.score:g}/{p.max_score:g}" for p in result.parts) if result else ""
                problems = "; ".join(f"{p.name}: {p.message}" for p in result.parts if p.message) if result else ""
                if result:  # why it stopped, why points were lost, then what the grader noted (a limit hit)
                    problems = "; ".join(filter(None, [result.error, problems, *result.notes]))
                writer.writerow([student, assignment, f"{sub.score:g}", f"{sub.max_score:g}", parts, problems,
                                 sub.timestamp.isoformat() if sub.timestamp else ""])
                rows += 1
    return rows


def now_utc() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f UTC")


def scratch_course() -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix="teenygrad-course-")
