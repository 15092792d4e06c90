"""Build the HTML book: bring chapters/ and exercises/ into book/, then run Jupyter Book.

Jupyter Book only sees files below book/, but every notebook has exactly one source in git (chapters/ or
exercises/), so the build copies them into book/chapters and book/exercises (ignored by git) first.
Warnings are errors, and a failing cell fails the build. Chapters are executed with Jupyter Book's
execution cache, so an unchanged chapter is not run again; exercises are shown unexecuted.
"""
from __future__ import annotations

import filecmp
import re
import shutil
import subprocess
import sys
from pathlib import Path

BOOK = Path(__file__).resolve().parent
REPO = BOOK.parent


def sync(src: Path, dest: Path) -> list[str]:
    """Mirror src/*.ipynb into dest, touching only what changed (Sphinx rebuilds by modification time)."""
    dest.mkdir(exist_ok=True)
    names = sorted(p.name for p in src.glob("*.ipynb"))
    for name in names:
        if not (dest / name).exists() or not filecmp.cmp(src / name, dest / name, shallow=False):
            shutil.copyfile(src / name, dest / name)
    for stale in dest.glob("*.ipynb"):
        if stale.name not in names:
            stale.unlink()
    return [f"{dest.name}/{Path(n).stem}" for n in names]


def main() -> int:
    pages = sync(REPO / "chapters", BOOK / "chapters") + sync(REPO / "exercises", BOOK / "exercises")
    toc = (BOOK / "_toc.yml").read_text()
    listed = set(re.findall(r"file:\s*(\S+)", toc))
    missing = [p for p in pages if p not in listed]
    if missing:
        print(f"book/_toc.yml does not list: {', '.join(missing)}; add them so they appear in the book",
              file=sys.stderr)
        return 1
    cmd = [str(Path(sys.executable).parent / "jupyter-book"), "build", ".", "-W", "--keep-going"]
    print(" ".join(cmd), flush=True)
    return subprocess.call(cmd, cwd=BOOK)  # from book/, so _config.yml's cache path is book/_build/...


if __name__ == "__main__":
    sys.exit(main())
