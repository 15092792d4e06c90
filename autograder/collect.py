"""Bring a class's submissions into the course: from per-learner folders or a learning-platform zip.

Every original file is kept byte for byte in `originals/<student>/<assignment>/<UTC time>/`, one folder per
attempt; an attempt identical to the previous one is not stored twice. The newest attempt is copied to
nbgrader's `submitted/<student>/<assignment>/<assignment>.ipynb`. Nothing is ever overwritten or deleted.

Who a file belongs to (the learner id keeps distinct people distinct):
- a folder `SOURCE/<student>/...ipynb`, or a zip entry `<student>/...ipynb`, gives `student` made safe
  (`Ann Lee` gives `ann-lee`);
- Moodle's `Full Name_12345_assignsubmission_file_/x.ipynb` gives `full-name-12345`: the participant
  number is part of the id, so two participants with the same name stay two learners;
- Canvas's flat `name_12345_67890_x.ipynb` (or `name_LATE_...`) gives `name-12345` (12345 is the user id).

Two inputs that would still map to one id (folders `Ann Lee/` and `ann-lee/`, or a name that differs from
the one an id was first collected under) are not guessed at: both are reported as a problem and kept byte
for byte in `unassigned/<assignment>/<UTC time>/`, and neither is graded until the instructor renames one.

Zips are read entry by entry, never extracted blindly: entries with absolute paths or `..`, symlinks, and
entries that inflate past the size limit (zip bombs) are skipped and reported.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import re
import stat
import unicodedata
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from autograder.notebooks import MAX_NOTEBOOK_BYTES, too_big

MAX_ZIP_TOTAL_BYTES = 4 * 2**30
MOODLE = re.compile(r"^(?P<name>.+?)_(?P<number>\d+)_assignsubmission_")
CANVAS = re.compile(r"^(?P<name>[A-Za-z0-9]+)_(?:late_)?(?P<number>\d+)_\d+_", re.IGNORECASE)
HANDED_IN_AS = "handed-in-as.txt"  # in originals/<student>/: the name the id was first collected under


@dataclass
class CollectReport:
    new: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def student_id(raw: str) -> str:
    """A safe id from a folder or file name: lowercase letters, digits, '.', '_' and '-' (accents dropped)."""
    text = unicodedata.normalize("NFKD", raw).encode("ascii", "ignore").decode()
    text = text.strip().lower().replace(" ", "-")
    return re.sub(r"[^a-z0-9._-]", "", text).strip(".-_")[:64]


def _numbered(name: str, number: str) -> str:
    """A platform learner's id: their name and participant number (`learner-N` if the name has no letters)."""
    return f"{student_id(name)[:40] or 'learner'}-{number}"


def owner(entry: PurePosixPath) -> tuple[str, str]:
    """(who handed it in, exactly as the platform or folder names them; their learner id)."""
    first = entry.parts[0]
    if len(entry.parts) > 1:
        m = MOODLE.match(first)
        if m:
            return f"{m.group('name')}_{m.group('number')}", _numbered(m.group("name"), m.group("number"))
        return first, student_id(first)
    m = CANVAS.match(first)
    if m:
        return f"{m.group('name')}_{m.group('number')}", _numbered(m.group("name"), m.group("number"))
    return Path(first).stem, student_id(Path(first).stem)


def owner_of(entry: PurePosixPath) -> str:
    """The learner id of a zip entry or a path below the source folder."""
    return owner(entry)[1]


def _attempt_time() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H-%M-%S.%fZ")


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


def _keep_unassigned(root: Path, assignment: str, when: str, who: str, files: dict[str, bytes]) -> Path:
    """Keep the files of a hand-in we cannot attribute, byte for byte, under the name it came with."""
    base = root / "unassigned" / assignment / when
    safe = re.sub(r"[^\w .,@+-]", "_", who).strip() or "unnamed"
    folder, n = base / safe[:100], 1
    while folder.exists():
        n += 1
        folder = base / f"{safe[:100]} ({n})"
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / name.replace("/", "__")).write_bytes(data)
    return folder


def _store_all(root: Path, assignment: str, handed_in: dict[str, tuple[str, dict[str, bytes]]],
               report: CollectReport) -> None:
    """Store each learner's notebook; hand-ins whose ids collide are kept aside and reported, never merged.

    `handed_in` maps who handed it in (as the source names them) to (their learner id, {file name: bytes}).
    """
    when = _attempt_time()
    by_id: dict[str, list[str]] = {}
    for who, (student, _files) in handed_in.items():
        by_id.setdefault(student, []).append(who)
    for student, whos in sorted(by_id.items()):
        marker = root / "originals" / student / HANDED_IN_AS
        earlier = marker.read_text().strip() if student and marker.is_file() else None
        if student and len(whos) == 1 and earlier in (None, whos[0]):
            files = handed_in[whos[0]][1]
            chosen = _choose(assignment, files, student, report)
            if chosen:
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.write_text(whos[0] + "\n")
                store(root, assignment, student, chosen[0], chosen[1], report)
            continue
        kept = [_keep_unassigned(root, assignment, when, who, handed_in[who][1]) for who in sorted(whos)]
        where = kept[0].parent
        names = " and ".join(repr(w) for w in sorted(whos))
        if not student:
            why = f"{names}: not usable as a learner id"
        elif len(whos) > 1:
            why = f"{names} would all be learner {student!r}"
        else:
            why = f"{names} would be learner {student!r}, who was collected before as {earlier!r}"
        report.problems.append(f"{why}; graded none, kept them byte for byte in {where} "
                               "(rename the folders so each learner's id is distinct, then collect again)")


def from_folder(source: Path, root: Path, assignment: str) -> CollectReport:
    report = CollectReport()
    handed_in: dict[str, tuple[str, dict[str, bytes]]] = {}
    for folder in sorted(p for p in source.iterdir() if p.is_dir() and not p.name.startswith(".")):
        who, student = owner(PurePosixPath(folder.name, "x"))
        files = {}
        for f in sorted(folder.rglob("*")):
            if f.is_symlink():
                report.problems.append(f"{folder.name}: {f.relative_to(folder)} is a symlink; skipped")
            elif f.is_file() and f.suffix == ".ipynb":
                if f.stat().st_size > MAX_NOTEBOOK_BYTES:
                    report.problems.append(f"{folder.name}: {f.name}: {too_big(f.stat().st_size)}; skipped")
                else:
                    files[str(f.relative_to(source))] = f.read_bytes()
        # Moodle's file and online-text folders of one participant are one hand-in
        handed_in.setdefault(who, (student, {}))[1].update(files)
    _store_all(root, assignment, handed_in, report)
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
    handed_in: dict[str, tuple[str, dict[str, bytes]]] = {}
    others: dict[str, tuple[str, int]] = {}  # learners' files that are not notebooks, to report who handed in none
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
            who, student = owner(path)
            if not name.lower().endswith(".ipynb"):
                others[who] = (student, others.get(who, (student, 0))[1] + 1)
                continue
            data = _read_limited(zf, info, MAX_NOTEBOOK_BYTES)
            if data is None:
                report.problems.append(f"{name}: inflates past the limit of {MAX_NOTEBOOK_BYTES >> 20} MB for a "
                                       "notebook (zip bomb?); skipped")
                continue
            total += len(data)
            if total > MAX_ZIP_TOTAL_BYTES:
                report.problems.append(f"{source}: more than {MAX_ZIP_TOTAL_BYTES >> 30} GB inflated; stopped")
                break
            handed_in.setdefault(who, (student, {}))[1][name] = data
    for who, (student, count) in sorted(others.items()):
        if who not in handed_in:
            report.problems.append(f"{student or who}: no .ipynb file handed in ({count} other files)")
    _store_all(root, assignment, handed_in, report)
    return report


def collect(source: Path, root: Path, assignment: str) -> CollectReport:
    if source.is_dir():
        return from_folder(source, root, assignment)
    if source.is_file():
        return from_zip(source, root, assignment)
    report = CollectReport()
    report.problems.append(f"{source}: no such file or folder")
    return report
