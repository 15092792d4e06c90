"""Put a submitted notebook back into the shape of its assignment before nbgrader runs it.

A fair grader grades the learner's code, not the accidents of editing. Before execution:

- graded cells (solution and test cells, by nbgrader grade_id) come in the assignment's order, each
  followed by the learner's own cells that followed it, so reordering cells changes nothing;
- a deleted test or locked cell comes back from the source; a deleted solution cell comes back as the
  released stub (so that part scores nothing, and the rest is still graded);
- a duplicated grade_id keeps its first cell; copies become ordinary cells;
- graded cells get the source's metadata back: a `skip-execution` or `raises-exception` tag on a test
  cell, or a changed nbgrader flag, has no effect. Test and locked cells get the source's code back
  (nbgrader checks this too).

After execution, `cap_outputs` bounds what one cell can write into the feedback (100 MB of text, a huge
image), so a notebook cannot blow up the gradebook's files or the instructor's browser.
"""
from __future__ import annotations

import copy

import nbformat

MAX_TEXT_CHARS = 20_000
MAX_DATA_CHARS = 2_000_000


def _gid(cell) -> str | None:
    meta = cell.get("metadata", {}).get("nbgrader")
    return meta.get("grade_id") if isinstance(meta, dict) and isinstance(meta.get("grade_id"), str) else None


def normalize(submitted: nbformat.NotebookNode, source: nbformat.NotebookNode,
              released: nbformat.NotebookNode) -> tuple[nbformat.NotebookNode, list[str]]:
    """The submission rearranged as described above, and a list of what was changed (for the feedback)."""
    changes: list[str] = []
    source_cells = {g: c for c in source.cells if (g := _gid(c))}
    released_cells = {g: c for c in released.cells if (g := _gid(c))}
    order = [_gid(c) for c in source.cells if _gid(c)]

    lead, segments, current = [], {}, None
    for cell in submitted.cells:
        gid = _gid(cell)
        if gid in source_cells and gid not in segments:
            current = gid
            segments[gid] = [cell]
            continue
        if gid is not None:  # a copy of a graded cell, or a grade_id the assignment does not have
            cell = copy.deepcopy(cell)
            cell.metadata.pop("nbgrader", None)
            changes.append(f"cell {gid!r} appeared twice or is unknown; graded the first copy only")
        (segments[current] if current else lead).append(cell)

    cells = list(lead)
    for gid in order:
        src = source_cells[gid]
        meta = src.metadata["nbgrader"]
        if gid not in segments:
            restored = copy.deepcopy(src if not meta.get("solution") else released_cells.get(gid, src))
            cells.append(restored)
            changes.append(f"cell {gid!r} was missing; restored {'the stub' if meta.get('solution') else 'it'}")
            continue
        head, *rest = segments[gid]
        head = copy.deepcopy(head)
        if head.cell_type != src.cell_type:
            head = copy.deepcopy(src if not meta.get("solution") else released_cells.get(gid, src))
            changes.append(f"cell {gid!r} changed type; restored it")
        head.metadata = copy.deepcopy(src.metadata)  # tags and nbgrader flags come from the source
        if meta.get("locked") and not meta.get("solution"):
            if head.source != released_cells.get(gid, src).source:  # what the learner was given
                changes.append(f"cell {gid!r} is locked and was edited; restored it")
            head.source = src.source
        cells.append(head)
        cells.extend(rest)
    if [_gid(c) for c in submitted.cells if _gid(c) in source_cells] != [g for g in order if g in segments]:
        changes.append("graded cells were out of order; ran them in the assignment's order")
    out = copy.deepcopy(submitted)
    out.cells = cells
    out.metadata["kernelspec"] = copy.deepcopy(source.metadata.get("kernelspec", out.metadata.get("kernelspec", {})))
    return out, changes


def cap_outputs(nb: nbformat.NotebookNode) -> int:
    """Shorten oversized outputs in place; return how many were cut."""
    cut = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and len(out.get("text", "")) > MAX_TEXT_CHARS:
                out["text"] = out["text"][:MAX_TEXT_CHARS] + f"\n[... output cut: over {MAX_TEXT_CHARS} characters]\n"
                cut += 1
            data = out.get("data")
            if isinstance(data, dict):
                for mime, value in list(data.items()):
                    size = len(value) if isinstance(value, str) else len(str(value))
                    if size > MAX_DATA_CHARS or (mime.startswith("text/") and size > MAX_TEXT_CHARS):
                        data.pop(mime)
                        data.setdefault("text/plain", f"[{mime} output cut: {size} characters]")
                        cut += 1
            if out.get("output_type") == "error" and len(out.get("traceback", [])) > 100:
                out["traceback"] = out["traceback"][:50] + ["[...]"] + out["traceback"][-49:]
                cut += 1
    return cut
