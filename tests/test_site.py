"""The book as a reader meets it online: the workflow that publishes it, and the built site itself.

The built HTML is the session's one book build (the `book_build` fixture, shared with tests/test_book.py).
What a browser adds (console errors, MathJax typesetting) is `make check-book`'s job (book/check_browser.py).
"""
from __future__ import annotations

import html
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import nbformat
import pytest
import yaml

from conftest import REPO

HTML = REPO / "book" / "_build" / "html"
WORKFLOW = REPO / ".github" / "workflows" / "book.yml"
CONFIG = yaml.safe_load((REPO / "book" / "_config.yml").read_text())
TOC = (REPO / "book" / "_toc.yml").read_text()
PAGES = [re.search(r"root:\s*(\S+)", TOC).group(1)] + re.findall(r"file:\s*(\S+)", TOC)
NOTEBOOK_PAGES = [p for p in PAGES if p.startswith(("chapters/", "exercises/"))]


# --- the workflow --------------------------------------------------------------------------------------------

def makefile_targets() -> set[str]:
    return set(re.findall(r"^([A-Za-z][\w-]*):", (REPO / "Makefile").read_text(), re.M))


def test_workflow_builds_with_the_makefile_and_deploys_to_pages():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    trigger = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on:` key as True
    assert "main" in trigger["push"]["branches"]
    assert workflow["permissions"]["pages"] == "write" and workflow["permissions"]["id-token"] == "write"
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    commands = [line.strip() for step in steps if "run" in step for line in step["run"].strip().splitlines()]
    targets = makefile_targets()
    for command in commands:  # the same build as on a reader's machine: nothing but the Makefile
        match = re.fullmatch(r"make ([\w-]+)", command)
        assert match and match.group(1) in targets, f"workflow step {command!r} is not a target of the Makefile"
    assert "make book" in commands
    uses = {step["uses"].split("@")[0]: step for step in steps if "uses" in step}
    assert uses["actions/upload-pages-artifact"]["with"]["path"] == "book/_build/html"
    assert "actions/deploy-pages" in uses
    cached = {step["with"]["path"] for step in steps if step.get("uses", "").startswith("actions/cache@")}
    assert cached == {".venv", "book/" + CONFIG["execute"]["cache"]}  # the venv, and the executed chapters


def test_readme_says_where_the_book_is_read_and_how_to_check_it():
    readme = (REPO / "README.md").read_text()
    assert "github.io" in readme and ".github/workflows/book.yml" in readme and "Settings > Pages" in readme
    assert "make check-book" in readme and "check-book:" in (REPO / "Makefile").read_text()


def test_launch_button_is_off_by_default_and_documented():
    assert CONFIG["launch_buttons"]["jupyterhub_url"] == ""
    assert "jupyterhub_url" in (REPO / "autograder" / "README.md").read_text()


def test_check_book_skips_with_instructions_without_a_browser(monkeypatch, capsys):
    sys.path.insert(0, str(REPO / "book"))
    try:
        import check_browser
    finally:
        sys.path.pop(0)
    monkeypatch.setattr(check_browser.shutil, "which", lambda name: None)
    assert check_browser.main([]) == 0
    out = capsys.readouterr().out
    assert "skipped" in out and "apt-get install -y chromium" in out


# --- the built site ------------------------------------------------------------------------------------------

class Links(HTMLParser):
    """The ids of a page, and every URL it points at, with the tag and attribute it came from."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.urls: list[tuple[str, str, str]] = []
        self.inline_scripts: list[str] = []
        self._in_script = False

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script and data.strip():
            self.inline_scripts.append(data.strip())

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key):
                self.ids.add(attrs[key])
        self._in_script = tag == "script" and not attrs.get("src")
        for key in ("href", "src"):
            if attrs.get(key) is not None and not (tag == "link" and attrs.get("rel") in ("canonical", "preconnect")):
                self.urls.append((tag, key, attrs[key]))


def parse(page: Path) -> Links:
    links = Links()
    links.feed(page.read_text(encoding="utf-8"))
    return links


@pytest.fixture(scope="module")
def site(book_build) -> dict[Path, Links]:
    assert book_build.returncode == 0, (book_build.stdout + book_build.stderr)[-3000:]
    pages = [p for p in HTML.rglob("*.html") if not p.relative_to(HTML).parts[0].startswith("_")]
    return {page: parse(page) for page in pages}


def test_every_toc_entry_is_a_page(site):
    for name in PAGES:
        assert HTML / f"{name}.html" in site, f"{name} is in book/_toc.yml but was not built"


def test_every_image_and_internal_link_resolves(site):
    broken = []
    for page, links in site.items():
        for tag, attr, url in links.urls:
            parts = urlsplit(url)
            if parts.scheme or url.startswith("//") or url.startswith(("mailto:", "javascript:", "data:")):
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if target.is_dir():
                target = target / "index.html"
            where = f"{page.relative_to(HTML)}: <{tag} {attr}={url!r}>"
            if not target.exists():
                broken.append(f"{where}: no file {target}")
            elif parts.fragment and target.suffix == ".html":
                ids = site[target].ids if target in site else parse(target).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{where}: no anchor #{parts.fragment}")
    assert not broken, "\n".join(broken[:40])


def test_nothing_is_loaded_from_the_network_and_mathjax_is_the_books_own(site):
    """Scripts, styles and images come from the book itself (it reads offline); math pages load the bundled
    MathJax (sphinx-mathjax-offline)."""
    math_pages = 0
    for page, links in site.items():
        for tag, attr, url in links.urls:
            if tag in ("script", "img") or (tag == "link" and attr == "href" and url.endswith(".css")):
                assert not urlsplit(url).scheme and not url.startswith("//"), f"{page.relative_to(HTML)} loads {url}"
        scripts = [url for tag, _, url in links.urls if tag == "script"]
        if any("mathjax" in url.lower() for url in scripts):
            math_pages += 1
            mathjax = [url for url in scripts if url.split("?")[0].endswith("_static/mathjax/tex-chtml.js")]
            assert mathjax and (page.parent / mathjax[0].split("?")[0]).resolve().is_file(), page
    assert math_pages >= len([p for p in PAGES if p.startswith("chapters/")])


def test_no_inline_script_runs_twice(site):
    """A configuration script repeated in a page redeclares its `const`s: a SyntaxError in the reader's console
    (sphinx-thebe's, before book/_ext/unique_scripts.py)."""
    for page, links in site.items():
        repeated = {body[:60] for body in links.inline_scripts if links.inline_scripts.count(body) > 1}
        assert not repeated, f"{page.relative_to(HTML)} repeats {sorted(repeated)}"


@pytest.mark.parametrize("name", NOTEBOOK_PAGES)
def test_notebook_pages_offer_their_notebook_for_download(site, name):
    page = HTML / f"{name}.html"
    downloads = [url for _, _, url in site[page].urls if url.split("?")[0].endswith(f"_sources/{name}.ipynb")]
    assert downloads, f"{name}.html has no download link for its notebook"
    notebook = (page.parent / downloads[0]).resolve()
    nb = nbformat.read(notebook, as_version=4)  # a real notebook, the one the page shows
    assert nb.cells[0].source.splitlines()[0].startswith(("# Chapter", "# Exercise"))


def test_a_configured_jupyterhub_gets_a_launch_button(tmp_path):
    """What autograder/README.md tells instructors to set makes a working nbgitpuller link (a one-page book)."""
    book = tmp_path / "book"
    (book / "exercises").mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Exercise 1: x"),
                                         nbformat.v4.new_code_cell("1 + 1")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, book / "exercises" / "01-x.ipynb")
    (book / "intro.md").write_text("# Intro\n")
    (book / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: exercises/01-x\n")
    (book / "_config.yml").write_text(
        "title: t\nexecute:\n  execute_notebooks: 'off'\n"
        "repository:\n  url: https://github.com/example-org/teenygrad\n  branch: main\n  path_to_book: ''\n"
        "launch_buttons:\n  notebook_interface: jupyterlab\n  jupyterhub_url: https://hub.example.edu\n")
    jb = Path(sys.executable).parent / "jupyter-book"
    proc = subprocess.run([str(jb), "build", str(book)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    page = (book / "_build" / "html" / "exercises" / "01-x.html").read_text()
    links = re.findall(r"https://hub\.example\.edu/hub/user-redirect/git-pull\?[^\"' ]+", html.unescape(page))
    assert links, "no launch button"
    query = parse_qs(urlsplit(links[0]).query)
    assert query == {"repo": ["https://github.com/example-org/teenygrad"], "branch": ["main"],
                     "urlpath": ["lab/tree/teenygrad/exercises/01-x.ipynb"]}  # the notebook's path in the repository
