"""Open every page of the built book in a real (headless) browser, as a reader would, and fail on what they'd see.

    python book/check_browser.py [--html book/_build/html] [--timeout 30]     (or: make check-book)

For each page listed in book/_toc.yml it reports
  * JavaScript errors: uncaught exceptions, console.error calls, and resources that failed to load;
  * math that MathJax left untypeset: a math element of the page without the mjx-container MathJax puts
    in its place, or MathJax's own error marker (merror).
The browser is Debian's chromium (or Chrome), driven through the DevTools protocol with websocket-client (a
dependency of Jupyter, so already in .venv). Without a browser the check is skipped, with a message saying
how to install one, and exits 0; with one, it exits 1 if any page has a problem.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BOOK = Path(__file__).resolve().parent
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALL = "sudo apt-get update && sudo apt-get install -y chromium   (Debian/Ubuntu; or install Google Chrome)"

# Runs in the page once it has loaded: wait for MathJax to finish, then count typeset and untypeset math.
MATH_STATE = """
(async () => {
  const mj = window.MathJax;
  if (mj && mj.startup && mj.startup.promise) { await mj.startup.promise; }
  const math = [...document.querySelectorAll('.math, span.math, div.math')];
  const untypeset = math.filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.slice(0, 60));
  return JSON.stringify({math: math.length, untypeset: untypeset,
                         errors: document.querySelectorAll('mjx-merror, merror').length,
                         mathjax: !!mj});
})()
"""


def toc_pages(html: Path) -> list[Path]:
    """The book's pages in reading order: intro, then every `file:` of book/_toc.yml."""
    toc = (BOOK / "_toc.yml").read_text()
    names = [re.search(r"root:\s*(\S+)", toc).group(1)] + re.findall(r"file:\s*(\S+)", toc)
    return [html / f"{name}.html" for name in names]


def find_browser() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


class Browser:
    """A headless chromium and one DevTools connection to a tab in it."""

    def __init__(self, executable: str) -> None:
        import websocket  # websocket-client, installed with Jupyter

        self.profile = tempfile.TemporaryDirectory(prefix="teenygrad-book-check-")
        self.proc = subprocess.Popen(
            [executable, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0",
             "--no-first-run", "--allow-file-access-from-files", f"--user-data-dir={self.profile.name}",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        port_file = Path(self.profile.name) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.exists() or len(port_file.read_text().split()) < 2:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                why = self.proc.stderr.read() if self.proc.poll() is not None else "timeout"
                raise RuntimeError(f"{executable} did not start: {why}")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        from urllib.request import urlopen
        tabs = json.loads(urlopen(f"http://127.0.0.1:{port}/json").read())
        page = next(t for t in tabs if t.get("type") == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, event: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        self.ws.settimeout(1)
        try:
            while time.monotonic() < deadline:
                if any(e.get("method") == event for e in self.events):
                    return True
                try:
                    self.events.append(json.loads(self.ws.recv()))
                except Exception:  # websocket timeout: look again
                    pass
            return False
        finally:
            self.ws.settimeout(60)

    def check(self, page: Path, timeout: float) -> list[str]:
        """Load one page; return its problems as sentences (empty: the page is fine)."""
        self.events.clear()
        self.call("Page.navigate", url=page.as_uri())
        if not self.wait_for("Page.loadEventFired", timeout):
            return [f"did not finish loading within {timeout:.0f} s"]
        state = self.call("Runtime.evaluate", expression=MATH_STATE, awaitPromise=True, returnByValue=True,
                          timeout=int(timeout * 1000))
        time.sleep(0.2)  # let late console messages arrive
        self.ws.settimeout(0.2)
        try:
            while True:
                self.events.append(json.loads(self.ws.recv()))
        except Exception:
            pass
        finally:
            self.ws.settimeout(60)
        problems = []
        for e in self.events:
            p = e.get("params", {})
            if e.get("method") == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                problems.append(f"JavaScript exception: {d.get('exception', {}).get('description') or d.get('text')}")
            elif e.get("method") == "Runtime.consoleAPICalled" and p.get("type") == "error":
                words = (str(a.get("value", a.get("description", ""))) for a in p["args"])
                problems.append("console error: " + " ".join(words))
            elif e.get("method") == "Log.entryAdded" and p["entry"]["level"] == "error":
                problems.append(f"browser error: {p['entry']['text']} {p['entry'].get('url', '')}".strip())
        if "exceptionDetails" in state:
            problems.append(f"the math check itself failed: {state['exceptionDetails'].get('text')}")
            return problems
        math = json.loads(state["result"]["value"])
        if math["math"] and not math["mathjax"]:
            problems.append(f"{math['math']} math elements but MathJax did not load")
        elif math["untypeset"]:
            problems.append(f"{len(math['untypeset'])} of {math['math']} math elements left untypeset, "
                            f"first: {math['untypeset'][0]!r}")
        if math["errors"]:
            problems.append(f"MathJax reported {math['errors']} errors (merror) in the page's math")
        return problems

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.profile.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--html", type=Path, default=BOOK / "_build" / "html", help="the built book")
    parser.add_argument("--timeout", type=float, default=30, help="seconds a page may take to load and typeset")
    args = parser.parse_args(argv)
    executable = find_browser()
    if executable is None:
        print(f"check-book skipped: no headless browser found ({', '.join(BROWSERS)}). Install one with\n"
              f"  {INSTALL}\nand run `make check-book` again.")
        return 0
    pages = toc_pages(args.html.resolve())
    missing = [p for p in pages if not p.exists()]
    if missing:
        print(f"not built: {', '.join(str(p) for p in missing)}; run `make book` first", file=sys.stderr)
        return 1
    browser = Browser(executable)
    failed = 0
    try:
        for page in pages:
            problems = browser.check(page, args.timeout)
            name = page.relative_to(args.html.resolve())
            print(f"{'FAIL' if problems else 'ok  '} {name}")
            for problem in problems:
                print(f"       {problem}")
            failed += bool(problems)
    finally:
        browser.close()
    print(f"{len(pages) - failed} of {len(pages)} pages without console errors or untypeset math ({executable})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
