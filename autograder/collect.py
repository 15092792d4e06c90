"""Bring a class's submissions into the course: from per-learner folders or a learning-platform zip.

Every original file is kept byte for byte in `originals/<student>/<assignment>/<UTC time>/`, one folder per
attempt; an attempt identical to the previous one is not stored twice. The newest attempt is copied to
nbgrader's `submitted/<student>/<assignment>/<assignment>.ipynb`. Nothing is ever overwritten or deleted.

Who a file belongs to:
- a folder `SOURCE/<student>/...ipynb`, or a zip entry `<student>/...ipynb`;
- Moodle's `Full Name_12345_assignsubmission_file_/x.ipynb` gives `full-name`;
- Canvas's flat `name_12345_67890_x.ipynb` (or `name_LATE_...`) gives `name`.

Zips are read entry by entry, never extracted blindly: entries with absolute paths or `..`, symlinks, and
entries that inflate past the size limit (zip bombs) are skipped and reported.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import re
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

MAX_NOTEBOOK_BYTES = 64 * 2**20  # a notebook with many plots is a few MB; this is far beyond
MAX_ZIP_TOTAL_BYTES = 4 * 2**30
MOODLE = re.compile(r"^(?P<name>.+?)_\d+_assignsubmission_")
CANVAS = re.compile(r"^(?P<name>[A-Za-z0-9]+)_(?:late_)?\d+_\d+_", re.IGNORECASE)


@dataclass
class CollectReport:
    new: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def student_id(raw: str) -> str:
    """A safe id from a folder or file name: lowercase letters, digits, '.', '_' and '-'."""
    text = raw.strip().lower().replace(" ", "-")
    return re.sub(r"[^a-z0-9._-]", "", text).strip(".-_")[:64]


def owner_of(entry: PurePosixPath) -> str:
    first = entry.parts[0]
    if len(entry.parts) > 1:
        m = MOODLE.match(first)
        return student_id(m.group("name") if m else first)
    m = CANVAS.match(first)
    return student_id(m.group("name") if m else Path(first).stem)


def _attempt_time() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H-%M-%S.%fZ")


def store(root: Path, assignment: str, student: str, name: str, data: bytes, report: CollectReport) -> None:
    """Keep `data` as a new attempt unless it equals the newest one; update nbgrader's submitted copy."""
    attempts = root / "originals" / student / assignment
    previous = sorted(p for p in attempts.glob("*") if p.is_dir())
    if previous:
        last = [f for f in previous[-1].iterdir() if f.is_file()]
        if last and hashlib.sha256(last[0].read_bytes()).digest() == hashlib.sha256(data).digest():
            report.unchanged.append(student)
            return
    when = _attempt_time()
    folder = attempts / when
    folder.mkdir(parents=True, exist_ok=False)
    safe_name = Path(name).name or f"{assignment}.ipynb"
    (folder / safe_name).write_bytes(data)
    sub = root / "submitted" / student / assignment
    sub.mkdir(parents=True, exist_ok=True)
    (sub / f"{assignment}.ipynb").write_bytes(data)
    stamp = dt.datetime.strptime(when, "%Y-%m-%dT%H-%M-%S.%fZ").strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    (sub / "timestamp.txt").write_text(stamp)
    report.new.append(student)


def _choose(assignment: str, files: dict[str, bytes], student: str, report: CollectReport) -> tuple[str, bytes] | None:
    """The one notebook a learner handed in: `<assignment>.ipynb` if present, else the only .ipynb."""
    notebooks = {n: d for n, d in files.items() if n.lower().endswith(".ipynb")
                 and ".ipynb_checkpoints" not in n}
    if not notebooks:
        report.problems.append(f"{student}: no .ipynb file handed in ({len(files)} other files)")
        return None
    named = [n for n in notebooks if Path(n).name == f"{assignment}.ipynb"]
    if named:
        return named[0], notebooks[named[0]]
    if len(notebooks) == 1:
        return next(iter(notebooks.items()))
    report.problems.append(f"{student}: {len(notebooks)} notebooks and none named {assignment}.ipynb; "
                           f"took none ({', '.join(sorted(Path(n).name for n in notebooks))})")
    return None


def from_folder(source: Path, root: Path, assignment: str) -> CollectReport:
    report = CollectReport()
    for folder in sorted(p for p in source.iterdir() if p.is_dir() and not p.name.startswith(".")):
        student = student_id(folder.name)
        if not student:
            report.problems.append(f"{folder.name!r}: not usable as a learner id; skipped")
            continue
        files = {}
        for f in folder.rglob("*"):
            if f.is_symlink():
                report.problems.append(f"{student}: {f.relative_to(folder)} is a symlink; skipped")
            elif f.is_file() and f.suffix == ".ipynb":
                if f.stat().st_size > MAX_NOTEBOOK_BYTES:
                    report.problems.append(f"{student}: {f.name} is over {MAX_NOTEBOOK_BYTES >> 20} MB; skipped")
                else:
                    files[str(f.relative_to(folder))] = f.read_bytes()
        chosen = _choose(assignment, files, student, report)
        if chosen:
            store(root, assignment, student, chosen[0], chosen[1], report)
    return report


def _read_limited(zf: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes | None:
    """Inflate one entry, giving up as soon as it passes `limit` bytes (headers can lie)."""
    out, size = [], 0
    with zf.open(info) as f:
        while chunk := f.read(1 << 20):
            size += len(chunk)
            if size > limit:
                return None
            out.append(chunk)
    return b"".join(out)


def from_zip(source: Path, root: Path, assignment: str) -> CollectReport:
    report = CollectReport()
    per_student: dict[str, dict[str, bytes]] = {}
    others: dict[str, int] = {}  # learners' files that are not notebooks, to report who handed in none
    total = 0
    try:
        zf = zipfile.ZipFile(source)
    except zipfile.BadZipFile:
        report.problems.append(f"{source}: not a zip file")
        return report
    with zf:
        for info in zf.infolist():
            name = info.filename
            path = PurePosixPath(name.replace("\\", "/"))
            if info.is_dir():
                continue
            if path.is_absolute() or ".." in path.parts or re.match(r"^[A-Za-z]:", name):
                report.problems.append(f"{name}: path escapes the folder; skipped")
                continue
            if stat.S_ISLNK(info.external_attr >> 16):
                report.problems.append(f"{name}: symlink; skipped")
                continue
            if "__MACOSX" in path.parts:
                continue
            if not name.lower().endswith(".ipynb"):
                others.setdefault(owner_of(path), 0)
                others[owner_of(path)] += 1
                continue
            data = _read_limited(zf, info, MAX_NOTEBOOK_BYTES)
            if data is None:
                report.problems.append(f"{name}: inflates past {MAX_NOTEBOOK_BYTES >> 20} MB (zip bomb?); skipped")
                continue
            total += len(data)
            if total > MAX_ZIP_TOTAL_BYTES:
                report.problems.append(f"{source}: more than {MAX_ZIP_TOTAL_BYTES >> 30} GB inflated; stopped")
                break
            student = owner_of(path)
            if not student:
                report.problems.append(f"{name}: cannot tell whose it is; skipped")
                continue
            per_student.setdefault(student, {})[name] = data
    for student, count in sorted(others.items()):
        if student and student not in per_student:
            report.problems.append(f"{student}: no .ipynb file handed in ({count} other files)")
    for student, files in sorted(per_student.items()):
        chosen = _choose(assignment, files, student, report)
        if chosen:
            store(root, assignment, student, chosen[0], chosen[1], report)
    return report


def collect(source: Path, root: Path, assignment: str) -> CollectReport:
    if source.is_dir():
        return from_folder(source, root, assignment)
    if source.is_file():
        return from_zip(source, root, assignment)
    report = CollectReport()
    report.problems.append(f"{source}: no such file or folder")
    return report
