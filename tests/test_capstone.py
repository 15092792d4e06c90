"""The capstone (autograder/capstone.py): chapter 9's GPTs trained on the learner's pieces, graded by the grader's
own numpy forward pass. The quick form runs here (two runs of about 30 s); the full form is
`make capstone` (its figures are chapter 9's, which the book build checks: tests/test_ch09_gpt.py)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

import teenygrad as tg
from autograder import capstone, mine
from autograder.judges import capstone as judge
from autograder.results import PartResult, Result
from teenygrad import edition
from teenygrad.gpt import GPT, GPTConfig

from conftest import REPO

QUICK = capstone.FORMS["quick"]
FULL = capstone.FORMS["full"]


# --- the judge's forward pass against teenygrad's GPT ------------------------------------------------------------

@pytest.mark.parametrize("cfg", [judge.NAMES_CFG, judge.shakespeare_cfg(11),
                                 GPTConfig(vocab_size=7, block_size=5, n_layer=2, n_head=2, n_embd=6, norm="rms",
                                           act="gelu", bias=True, tie_weights=False)],
                         ids=["names", "shakespeare", "rms-gelu-bias"])
def test_numpy_forward_matches_teenygrads_gpt(cfg):
    rng = np.random.default_rng(cfg.n_embd)
    model = GPT(cfg).to(tg.float64)
    params = {name: rng.normal(scale=0.3, size=p.shape) for name, p in model.state_dict().items()}
    model.load_state_dict(params)
    assert judge.expected_shapes(cfg) == {k: v.shape for k, v in params.items()}
    idx = rng.integers(0, cfg.vocab_size, size=(3, cfg.block_size))
    targets = rng.integers(0, cfg.vocab_size, size=(3, cfg.block_size))
    want, loss = model(tg.tensor(idx), tg.tensor(targets))
    np.testing.assert_allclose(judge.logits(params, cfg, idx), want.numpy(), rtol=1e-9, atol=1e-9)
    assert judge.cross_entropy_sum(judge.logits(params, cfg, idx), targets) / targets.size == pytest.approx(
        loss.item(), rel=1e-9)
    assert judge.check_parameters(params, cfg) is None


def test_parameters_that_are_not_the_gpts_are_refused():
    rng = np.random.default_rng(0)
    params = {k: rng.normal(size=s) for k, s in judge.expected_shapes(judge.NAMES_CFG).items()}
    assert "missing" in judge.check_parameters({k: v for k, v in params.items() if k != "head.weight"},
                                               judge.NAMES_CFG)
    assert "shape" in judge.check_parameters({**params, "wte.weight": np.zeros((3, 3))}, judge.NAMES_CFG)
    assert "not finite" in judge.check_parameters({**params, "wte.weight": params["wte.weight"] * np.nan},
                                                  judge.NAMES_CFG)


def test_the_full_forms_figures_are_chapter_9s():
    from test_ch09_gpt import FULL_NAMES_LOSS, FULL_VAL_LOSS

    assert FULL.names_loss == pytest.approx(FULL_NAMES_LOSS, abs=0.005)
    assert FULL.shakespeare_loss == pytest.approx(FULL_VAL_LOSS, abs=0.005)
    assert (FULL.names_steps, FULL.shakespeare_steps, FULL.warmup, FULL.val_batches) == (1000, 2000, 100, 50)
    assert FULL.tolerance == 0.05 and QUICK.names_steps == FULL.names_steps


# --- the quick capstone, run as a learner runs it -----------------------------------------------------------------

def run_capstone(folder: Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "autograder", "capstone", "--quick", "--mine", str(folder), "--json"],
                          cwd=REPO, capture_output=True, text=True, timeout=900, env={**os.environ})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def in_band(loss: float | None, target: float) -> bool:
    return loss is not None and abs(loss - target) <= QUICK.tolerance


def test_the_solutions_as_mine_reach_the_band_and_every_piece_is_theirs(tmp_path):
    if not edition.pieces():
        pytest.skip("no function of teenygrad is marked as an exercise's piece yet")
    mine.record_solutions(tmp_path)
    report = run_capstone(tmp_path)
    assert not report["problems"], report["problems"]
    assert report["rows"] and all(r["whose"] == "yours" for r in report["rows"])
    assert in_band(report["names_loss"], QUICK.names_loss) and in_band(report["shakespeare_loss"], QUICK.shakespeare_loss)
    # the quick form's figures are what the book's pieces reach; the reference solutions reach them too
    assert report["names_loss"] == pytest.approx(QUICK.names_loss, abs=0.002)
    assert report["shakespeare_loss"] == pytest.approx(QUICK.shakespeare_loss, abs=0.002)
    assert report["points"] == {"names": 3.0, "shakespeare": 3.0, "compiled": 2.0, "pieces": 2.0}
    assert report["score"] == report["max_score"] == 10
    assert any(r["calls"] > 0 for r in report["rows"])  # the training really went through the pieces
    # the compiled twin went through the learner's compiler pieces, and its held-out loss is the eager twin's
    assert all(r["calls"] > 0 for r in report["rows"] if r["assignment"] == "10-compiler")
    twins = report["twin_losses"]
    assert set(twins) == {"eager", "compiled"} and abs(twins["compiled"] - twins["eager"]) <= capstone.TWIN_TOLERANCE
    assert len(report["samples"]["names"]) == 8 and len(report["samples"]["shakespeare"]) == 240


WRONG_LR = """
def lr_at(step, total_steps, lr, warmup=0, min_lr=0.0, kind="cosine"):
    return 20 * lr  # wrong: no schedule, and twenty times the rate


PARTS = ["lr_at"]
"""

WRONG_INDEX = """
def index_expr(view, names):
    terms = [names[d] if st == 1 else f"{names[d]} * {st}" for d, st in enumerate(view.strides)
             if st != 0 and view.shape[d] != 1]
    return " + ".join(terms) or "0"  # wrong: the view's offset is left out (a slice reads the wrong elements)


PARTS = ["index_expr"]
"""


def test_wrong_pieces_miss_the_band_and_the_compiled_twin(tmp_path):
    """A wrong schedule trains both GPTs out of their bands; a wrong piece of the compiler sets the compiled twin apart
    from the eager one (both twins run the same wrong schedule, so only the compiler tells them apart)."""
    (tmp_path / "07-neural-nets.py").write_text(WRONG_LR)
    (tmp_path / "10-compiler.py").write_text(WRONG_INDEX)
    report = run_capstone(tmp_path)
    mine_rows = [r for r in report["rows"] if r["part"] in ("lr_at", "index_expr")]
    assert len(mine_rows) == 2 and all(r["whose"] == "yours" and r["calls"] > 0 for r in mine_rows)
    # every other piece is the book's, as with an empty mine/
    assert all(r["whose"] == "the book's" for r in report["rows"] if r not in mine_rows)
    assert not in_band(report["names_loss"], QUICK.names_loss)
    assert not in_band(report["shakespeare_loss"], QUICK.shakespeare_loss)
    twins = report["twin_losses"]
    assert set(twins) == {"eager", "compiled"} and abs(twins["compiled"] - twins["eager"]) > capstone.TWIN_TOLERANCE
    assert [p for p in report["problems"] if "compiled step" in p] == report["problems"]
    assert report["points"]["names"] == report["points"]["shakespeare"] == report["points"]["compiled"] == 0
    lines = sum(r["lines"] for r in mine_rows) / sum(r["lines"] for r in report["rows"])
    assert report["points"]["pieces"] == round(2 * lines, 2) > 0  # weighed by code lines, not counted


def first_function(code: str) -> str:
    """The name of the first function a solution cell defines: the piece a fake part is made of."""
    return re.search(r"^def (\w+)\(", code, re.M).group(1)


# --- an instructor's view: a learner's graded submissions -----------------------------------------------------------

def test_mine_from_a_course_takes_the_parts_with_full_marks(tmp_path, monkeypatch):
    assignment = "01-regression"
    nb = nbformat.read(REPO / "solutions" / f"{assignment}.ipynb", as_version=4)
    cells = mine.notebook_cells(nb)[1]
    parts = list(cells)
    pieces = {p: [edition.Piece(assignment, p, "teenygrad.fake", first_function(cells[p]), Path("fake.py"), 1)]
              for p in parts}
    monkeypatch.setattr(mine.edition, "parts", lambda a: pieces if a == assignment else {})
    graded = tmp_path / "course" / "autograded" / "ann" / assignment
    graded.mkdir(parents=True)
    nbformat.write(nb, graded / f"{assignment}.ipynb")
    result = Result(assignment, "ann", parts=[PartResult(p, 1.0 if i % 2 == 0 else 0.0, 1.0)
                                              for i, p in enumerate(parts)])
    (graded / "result.json").write_text(json.dumps(result.to_json()))
    lines = capstone.mine_from_course(tmp_path / "course", "ann", tmp_path / "mine")
    assert len(lines) == 1 and "ann's 01-regression" in (tmp_path / "mine" / f"{assignment}.py").read_text()
    assert list(mine.read_mine(tmp_path / "mine" / f"{assignment}.py")) == ["setup", *parts[::2]]
    with pytest.raises(FileNotFoundError, match="no graded submissions of learner 'bob'"):
        capstone.mine_from_course(tmp_path / "course", "bob", tmp_path / "mine2")


def test_keep_mine_writes_a_learners_pieces_and_never_overwrites(tmp_path, monkeypatch, capsys):
    """`capstone --course --learner --keep-mine DIR`: the learner's mine/ for their hub home."""
    from autograder import cli

    assignment = "01-regression"
    nb = nbformat.read(REPO / "solutions" / f"{assignment}.ipynb", as_version=4)
    cells = mine.notebook_cells(nb)[1]
    parts = list(cells)
    pieces = {p: [edition.Piece(assignment, p, "teenygrad.fake", first_function(cells[p]), Path("fake.py"), 1)]
              for p in parts}
    monkeypatch.setattr(mine.edition, "parts", lambda a: pieces if a == assignment else {})
    monkeypatch.setattr(capstone, "grade", lambda folder, form, log=print: None)  # no training here
    monkeypatch.setattr(capstone, "print_report", lambda report: None)
    graded = tmp_path / "course" / "autograded" / "ann" / assignment
    graded.mkdir(parents=True)
    nbformat.write(nb, graded / f"{assignment}.ipynb")
    result = Result(assignment, "ann", parts=[PartResult(p, 1.0, 1.0) for p in parts])
    (graded / "result.json").write_text(json.dumps(result.to_json()))
    keep = tmp_path / "ann-mine"
    args = ["capstone", "--quick", "--course", str(tmp_path / "course"), "--learner", "ann", "--keep-mine", str(keep)]
    assert cli.main(args) == 0
    assert list(mine.read_mine(keep / f"{assignment}.py")) == ["setup", *parts]
    before = (keep / f"{assignment}.py").read_text()
    assert cli.main(args) != 0  # the folder holds files now: refused, one clear line
    assert "nothing is overwritten" in capsys.readouterr().err
    assert (keep / f"{assignment}.py").read_text() == before
