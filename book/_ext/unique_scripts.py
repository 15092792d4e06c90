"""Sphinx extension: write each <script> into a page once.

With Sphinx 7.4, sphinx-thebe and sphinx-togglebutton (both loaded by Jupyter Book 1) add their inline
configuration scripts to every page twice. A repeated `var` is harmless, but sphinx-thebe's
`const THEBE_JS_URL = ...` declared twice is a SyntaxError in every reader's console, which
`make check-book` (book/check_browser.py) reports. Dropping exact repeats, in order, fixes it.
"""
from __future__ import annotations


def unique_scripts(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not isinstance(scripts, list):
        return
    seen, unique = set(), []
    for script in scripts:
        # the second copy of an inline script has filename "" where the first has None
        key = (str(script.filename or ""), tuple(sorted(script.attributes.items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique  # a new list: the builder restores its own for the next page


def setup(app):
    app.connect("html-page-context", unique_scripts, priority=900)  # after the extensions that add scripts
    return {"parallel_read_safe": True, "parallel_write_safe": True}
