"""Chapter 9's pieces: the 09-gpt judge (its numpy references against teenygrad and finite differences), the
solutions notebook against the judge, plausible mistakes rejected, and the chapter's stated figures (a
shortened run here; the full run's figures from the book build)."""
from __future__ import annotations

import re

import nbformat
import numpy as np
import pytest

import teenygrad as tg
from autograder.judges.gpt import (
    BLOCK_KEYS,
    PARTS,
    TRAIN_HIGH,
    TRAIN_STEPS,
    _check_training,
    attention_np,
    gpt_block_np,
    layer_norm_backward_np,
    layer_norm_np,
)
from teenygrad import functional as F
from teenygrad.gpt import GPT, GPTConfig
from teenygrad.grading import GRADING_DIR_ENV

from conftest import REPO, book_figures, executed_figures, notebook_namespace, replacing, run_hidden, solution_cells

CHAPTER = REPO / "chapters" / "09-gpt.ipynb"
SOLUTIONS = REPO / "solutions" / "09-gpt.ipynb"
POINTS = {"causal_attention": 2, "layer_norm_backward": 2, "gpt_block": 2}
NAMES_CFG = GPTConfig(vocab_size=27, block_size=16, n_layer=1, n_head=4, n_embd=16, norm="rms", norm_weights=False,
                      act="relu", bias=False, tie_weights=False, init_std=0.08)


# --- the judge's references ------------------------------------------------------------------------------------

@pytest.mark.parametrize("qshape, tk", [((5, 4), 5), ((2, 3, 6, 4), 6), ((1, 1, 3), 1), ((2, 3, 4), 9), ((4, 1), 7)])
def test_attention_reference_matches_teenygrad(qshape, tk):
    rng = np.random.default_rng(tk)
    q = rng.normal(size=qshape)
    k, v = rng.normal(size=(*qshape[:-2], tk, qshape[-1])), rng.normal(size=(*qshape[:-2], tk, qshape[-1]))
    got = F.causal_attention(tg.tensor(q), tg.tensor(k), tg.tensor(v)).numpy()
    np.testing.assert_allclose(attention_np(q, k, v), got, rtol=1e-10, atol=1e-12)


def test_attention_reference_is_causal_and_offset_for_a_cache():
    """Changing a later key or value never changes an earlier output; the last Tq queries of Tk positions see
    exactly what they see in the full computation."""
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(6, 3)), rng.normal(size=(6, 3)), rng.normal(size=(6, 3))
    full = attention_np(q, k, v)
    k2, v2 = k.copy(), v.copy()
    k2[4:], v2[4:] = 10.0, -10.0
    np.testing.assert_allclose(attention_np(q, k2, v2)[:4], full[:4])
    np.testing.assert_allclose(attention_np(q[4:], k, v), full[4:])


@pytest.mark.parametrize("shape", [(1, 4), (5, 8), (2, 3, 6), (4, 1), (3, 2)])
def test_layer_norm_reference_matches_teenygrad_and_finite_differences(shape):
    rng = np.random.default_rng(len(shape) * 10 + shape[-1])
    x, w, b, g = rng.normal(size=shape) * 2 + 1, rng.normal(size=shape[-1]), rng.normal(size=shape[-1]), rng.normal(size=shape)
    want = layer_norm_backward_np(x, w, b, g)
    np.testing.assert_allclose(layer_norm_np(x, w, b), F.layer_norm_unfused(tg.tensor(x), tg.tensor(w), tg.tensor(b)).numpy(),
                               rtol=1e-10, atol=1e-10)
    for ln in (F.layer_norm, F.layer_norm_unfused):  # the fused rule and autograd through the composed ops
        X, W, B = (tg.tensor(a).requires_grad_() for a in (x, w, b))
        ln(X, W, B).backward(tg.tensor(g))
        for got, ref in zip((X.grad, W.grad, B.grad), want):
            np.testing.assert_allclose(got.numpy(), ref, rtol=1e-8, atol=1e-10)
    for arr, ref in zip((x, w, b), want):
        numeric = np.zeros_like(arr)
        for i in np.ndindex(arr.shape):
            saved = arr[i]
            arr[i] = saved + 1e-6
            up = np.sum(g * layer_norm_np(x, w, b))
            arr[i] = saved - 1e-6
            numeric[i] = (up - np.sum(g * layer_norm_np(x, w, b))) / 2e-6
            arr[i] = saved
        np.testing.assert_allclose(ref, numeric, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("B, T, C, nh", [(1, 1, 4, 1), (2, 5, 8, 2), (1, 6, 16, 4)])
def test_block_reference_matches_teenygrads_block(B, T, C, nh):
    rng = np.random.default_rng(C)
    model = GPT(GPTConfig(vocab_size=5, block_size=T, n_layer=1, n_head=nh, n_embd=C)).to(tg.float64)
    model.load_state_dict({name: rng.normal(scale=0.4, size=p.shape) for name, p in model.state_dict().items()})
    blk = model.blocks[0]
    layers = [blk.norm1, blk.attn.qkv, blk.attn.proj, blk.norm2, blk.mlp.fc, blk.mlp.proj]
    weights = [t.numpy() for layer in layers for t in (layer.weight, layer.bias)]
    assert len(weights) == len(BLOCK_KEYS)
    x = rng.normal(size=(B, T, C))
    np.testing.assert_allclose(gpt_block_np(x, *weights, nh), blk(tg.tensor(x)).numpy(), rtol=1e-9, atol=1e-10)


def test_cases_cover_the_edge_cases():
    rng = np.random.default_rng(0)
    for name, part in PARTS.items():
        cases = part.cases(rng)
        assert len(cases[-1]) == 2 and cases[-1][1] == TRAIN_STEPS and all(len(c) > 2 for c in cases[:-1]), name
    att = PARTS["causal_attention"].cases(rng)[:-1]
    assert any(q.shape[-2] == 1 for q, _, _ in att) and any(k.shape[-2] > q.shape[-2] for q, k, _ in att)
    assert any(q.ndim == 2 for q, _, _ in att) and any(q.ndim == 4 for q, _, _ in att) and any(q.shape[-1] == 1 for q, _, _ in att)
    ln = PARTS["layer_norm_backward"].cases(rng)[:-1]
    assert any(x.shape[-1] == 1 for x, *_ in ln) and any(x.ndim >= 3 for x, *_ in ln) and any(x.shape[0] == 1 for x, *_ in ln)
    blocks = PARTS["gpt_block"].cases(rng)[:-1]
    assert any(c[0].shape[1] == 1 for c in blocks) and any(c[-1] == 1 for c in blocks) and any(c[-1] == 4 for c in blocks)


# --- the solutions notebook against the judge -----------------------------------------------------------------

def test_solutions_notebook_matches_the_judge():
    solutions, tests = solution_cells(SOLUTIONS)  # the notebook's house rules: tests/test_notebooks.py
    assert set(solutions) == set(tests) == set(PARTS) == set(POINTS)
    for part, (points, hidden) in tests.items():
        assert points == POINTS[part]
        head = solutions[part][:solutions[part].index("### BEGIN SOLUTION")]
        assert f"def {part}(" in head
        for other in set(PARTS) - {part}:  # each part is graded on its own
            assert f"{other}(" not in solutions[part].replace(f"def {part}(", "")
            assert f"{other}(" not in hidden.replace(f"def run_{part}(", "")
        for banned in ("F.", "causal_self_attention", "layer_norm(", "GPT(", "nn."):  # no package shortcuts
            assert banned not in solutions[part].replace(f"def {part}(", ""), (part, banned)


@pytest.mark.parametrize("seed", [0])
def test_solution_code_passes_the_judge(seed, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, hidden = notebook_namespace(SOLUTIONS)
    assert run_hidden(PARTS, namespace, hidden, PARTS, tmp_path, seed) == {part: None for part in PARTS}


WRONG = {  # (part, text in the solution, replacement): plausible mistakes the judge must catch
    "attention without the 1/sqrt(hs) scale": ("causal_attention", "* (1.0 / np.sqrt(hs))", "* 1.0"),
    "attention's mask ignores the offset of a cache": ("causal_attention", "k=tk - tq + 1", "k=1"),
    "layer norm's dx without the projection term": ("layer_norm_backward",
                                                    "- xhat * (dxhat * xhat).mean(-1, keepdim=True))", ")"),
    "layer norm's dw from x instead of x-hat": ("layer_norm_backward", "(g2 * xhat).sum(0)", "(g2 * x).sum(0)"),
    "block without the attention's residual": ("gpt_block", "x = x + (y @ p[\"proj_w\"].T + p[\"proj_b\"])",
                                               "x = y @ p[\"proj_w\"].T + p[\"proj_b\"]"),
    "block with a ReLU for the GELU": ("gpt_block", "+ p[\"fc_b\"]).gelu()", "+ p[\"fc_b\"]).relu()"),
    "block mixes the heads up (transposes to (B, T, hs, nh))": ("gpt_block", ".reshape(B, T, n_head, hs).transpose(1, 2)",
                                                                 ".reshape(B, T, hs, n_head).permute(0, 3, 1, 2)"),
}


@pytest.mark.parametrize("mistake", list(WRONG))
def test_judge_rejects_wrong_parts(mistake, tmp_path, monkeypatch, capsys):
    part, old, new = WRONG[mistake]
    monkeypatch.setenv(GRADING_DIR_ENV, str(tmp_path))
    namespace, hidden = notebook_namespace(SOLUTIONS, replacing(part, old, new))
    verdicts = run_hidden(PARTS, namespace, hidden, [part], tmp_path, seed=5)
    assert verdicts[part] is not None, mistake


def test_training_check():
    """A correct run passes; a run that does not learn, or blows up, or has the wrong length, does not."""
    namespace, _ = notebook_namespace(SOLUTIONS)
    right = namespace["train_tiny_gpt"](0, TRAIN_STEPS, attention=namespace["causal_attention"])
    assert right[-20:].mean() < TRAIN_HIGH - 0.1 and _check_training((0, TRAIN_STEPS), (right,)) is None
    flat = np.full(TRAIN_STEPS, right[0])
    assert "only fell" in _check_training((0, TRAIN_STEPS), (flat,))
    assert "nan" in _check_training((0, TRAIN_STEPS), (np.r_[right[:-1], np.nan],))
    assert "losses" in _check_training((0, TRAIN_STEPS), (right[:-1],))
    assert "starts" in _check_training((0, TRAIN_STEPS), (right - 1.0,))


# --- the chapter ------------------------------------------------------------------------------------------------

# The chapter's house rules (title, headings, outputs, exercise link): tests/test_notebooks.py

STATED = {"ch9_names_params", "ch9_names_test_loss", "ch9_shakespeare_val_loss", "ch9_shakespeare_minutes",
          "ch9_kv_cached_ms", "ch9_kv_uncached_ms", "ch9_kv_speedup", "ch9_kv_work_ratio", "ch9_fused_ms", "ch9_unfused_ms", "ch9_fusion_speedup", "ch9_attention_fusion_speedup",
          "ch9_value_ms_per_step", "ch9_value_speedup", "ch9_names_test_loss_std002", "ch9_shakespeare_train_loss",
          "ch9_sample_real_words", "ch9_sample_speaker_lines", "ch9_sample_line_length", "ch9_text_line_length",
          "ch9_stats_chars",
          "ch9_local_layer0_min", "ch9_local_layer0_mean", "ch9_local_later_mean", "ch9_local_uniform", "ch9_boundary_share",
          "ch9_boundary_heads_2x", "ch9_boundary_ratio_max"}


def test_every_figure_in_the_prose_is_glued_by_the_code():
    nb = nbformat.read(CHAPTER, as_version=4)
    prose = "".join(c.source for c in nb.cells if c.cell_type == "markdown")
    code = "".join(c.source for c in nb.cells if c.cell_type == "code")
    used = set(re.findall(r"\{glue:text\}`([a-z0-9_]+)", prose))
    glued = set(re.findall(r'glue\("([a-z0-9_]+)"', code))
    assert used == STATED and used <= glued
    assert "benchmarks/gpt.py" in prose and "benchmarks/names_gpt.py" in prose


def test_names_gpt_has_the_stated_size():
    assert GPT(NAMES_CFG).num_parameters() == 4192  # "4,192 parameters with a 27-symbol vocabulary"


def test_kv_cache_generates_the_same_tokens_as_without_it():
    tg.manual_seed(3)
    model = GPT(NAMES_CFG)
    for prompt, n in [([0], 15), ([0, 5, 13], 40)]:  # within the context, and well past it
        for temperature in (0.0, 1.0):
            runs = [model.generate(prompt, n, temperature=temperature, rng=np.random.default_rng(1), use_cache=c)
                    for c in (True, False)]
            assert runs[0] == runs[1]


SHORT_NAMES_LOSS, SHORT_VAL_LOSS = 2.525, 2.520  # measured with the shortened configuration below
FULL_NAMES_LOSS, FULL_VAL_LOSS = 2.435, 1.746     # measured with the chapter's (and the book build's) full one
SHORT = {"BATCH, CONTEXT, STEPS = 12, 64, 2000": "BATCH, CONTEXT, STEPS = 12, 64, 150",
         "NAMES_STEPS, NAMES_LR = 1000, 0.01": "NAMES_STEPS, NAMES_LR = 300, 0.01"}


@pytest.fixture(scope="module")
def short_run() -> dict[str, float]:
    """The whole chapter in a fresh kernel with the two trainings shortened (150 Shakespeare steps, 300 names):
    it runs top to bottom, and glues its figures. The full run is the book build's (test_full_run_figures)."""
    nb = nbformat.read(CHAPTER, as_version=4)
    for old, new in SHORT.items():
        cells = [c for c in nb.cells if c.cell_type == "code" and old in c.source]
        assert len(cells) == 1, old
        cells[0].source = cells[0].source.replace(old, new)
    return executed_figures(nb, CHAPTER.parent, timeout=1800)


def test_short_run_figures(short_run):
    fig = short_run
    assert set(fig) >= STATED
    assert fig["ch9_names_params"] == 4192
    assert fig["ch9_names_test_loss"] == pytest.approx(SHORT_NAMES_LOSS, abs=0.03)   # 300 names
    assert fig["ch9_shakespeare_val_loss"] == pytest.approx(SHORT_VAL_LOSS, abs=0.05)  # 150 steps
    # timings are machine-dependent: only that they were measured
    for name in ("ch9_shakespeare_minutes", "ch9_kv_cached_ms", "ch9_kv_uncached_ms", "ch9_kv_speedup", "ch9_kv_work_ratio", "ch9_fused_ms", "ch9_unfused_ms", "ch9_value_speedup"):
        assert fig[name] > 0, name


def test_full_run_figures(book_build):
    """The figures of the full run, as the book build measured them: the stated 1.9 bound on the validation
    loss, and the held-out loss of the names GPT."""
    fig = book_figures("09-gpt")
    assert fig["ch9_names_params"] == 4192
    assert fig["ch9_names_test_loss"] == pytest.approx(FULL_NAMES_LOSS, abs=0.02)
    assert fig["ch9_shakespeare_val_loss"] <= 1.9
    assert fig["ch9_shakespeare_val_loss"] == pytest.approx(FULL_VAL_LOSS, abs=0.03)
    assert_interpretations(fig)


def assert_interpretations(fig: dict[str, float]) -> None:
    """What the chapter's prose says about the measured figures (each is glued; these are the words around them)."""
    # "the short run does not make up for the small start": nanoGPT's 0.02 ends worse than microgpt's 0.08
    assert fig["ch9_names_test_loss_std002"] > fig["ch9_names_test_loss"]
    # "close to the validation loss": no overfitting
    assert abs(fig["ch9_shakespeare_train_loss"] - fig["ch9_shakespeare_val_loss"]) < 0.1
    # the sample "has their shape": speaker lines, lines of about the plays' length, words mostly real
    assert fig["ch9_sample_speaker_lines"] >= 1
    assert 0.5 < fig["ch9_sample_line_length"] / fig["ch9_text_line_length"] < 2
    assert fig["ch9_sample_real_words"] > 0.5
    # bands: every layer-0 head keeps well over an even spread's share on the last two characters, later layers less
    assert fig["ch9_local_layer0_min"] > 2 * fig["ch9_local_uniform"]
    assert fig["ch9_local_layer0_min"] <= fig["ch9_local_layer0_mean"]
    assert fig["ch9_local_later_mean"] < fig["ch9_local_layer0_mean"]
    # stripes: spaces and line breaks get more than twice their share in at least one later head
    assert fig["ch9_boundary_heads_2x"] >= 1 and fig["ch9_boundary_ratio_max"] > 2
    assert 0 < fig["ch9_boundary_share"] < 0.5


