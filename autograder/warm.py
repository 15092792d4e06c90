"""A warm numba cache for the sandboxes, so a learner's notebook doesn't recompile all of teenygrad.

Each sandbox gets a numba cache of its own (nothing one submission compiles can reach another), but
starting it empty would make every submission spend tens of seconds compiling teenygrad's kernels. So,
once per version of teenygrad's source, a trusted process runs every op on small tensors of each dtype
with NUMBA_CACHE_DIR pointing at a fresh folder, and each sandbox starts from a copy of that folder.
Only teenygrad's own code is compiled here, never a solution.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from autograder import course

WARM_UP = r'''
import itertools
import teenygrad as tg

def attempt(fn):
    try:
        fn()
    except Exception:
        pass  # an op a dtype doesn't support: nothing to compile

for dt in (tg.float32, tg.float64):
    a, b = tg.randn(3, 4, dtype=dt), tg.randn(4, 5, dtype=dt)
    views = [a, a.T.T, a[:, ::2], a[::-1], a.T, tg.randn(1, 4, dtype=dt).expand(3, 4)]
    for x in views:
        for name in ("neg", "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "gelu", "abs"):
            attempt(lambda: getattr(x.abs() + 1, name)())
        for y in (x, 2.0, tg.randn(4, dtype=dt), tg.randn(3, 1, dtype=dt)):
            for op in ("__add__", "__sub__", "__mul__", "__truediv__", "__pow__", "maximum",
                       "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__radd__", "__rsub__"):
                attempt(lambda: getattr(x, op)(y))
        for axis in (None, 0, 1, (0, 1)):
            for red in ("sum", "max", "mean", "argmax"):
                attempt(lambda: getattr(x, red)(axis=axis))
                attempt(lambda: getattr(x, red)(axis=axis, keepdim=True))
        for ax in (0, -1):
            attempt(lambda: x.softmax(ax))
            attempt(lambda: x.log_softmax(ax))
        attempt(lambda: x.contiguous())
        attempt(lambda: x.reshape(-1))
    for m, n, k in ((3, 5, 4), (70, 70, 70), (200, 130, 90)):
        attempt(lambda: tg.randn(m, k, dtype=dt) @ tg.randn(k, n, dtype=dt))
        attempt(lambda: tg.randn(2, m, k, dtype=dt) @ tg.randn(2, k, n, dtype=dt))
        attempt(lambda: tg.randn(m, k, dtype=dt) @ tg.randn(k, dtype=dt))
    idx = tg.Tensor([0, 2, 1, 2])
    attempt(lambda: a.index_select(0, idx))
    attempt(lambda: a.gather(1, tg.Tensor([[0], [1], [3]])))
    attempt(lambda: tg.cat([a, a], 0))
    attempt(lambda: tg.stack([a, a], 1))
    attempt(lambda: a.to(tg.float64 if dt == tg.float32 else tg.float32))
    attempt(lambda: a.to(tg.int64))
    def setitem():
        c = a.clone(); c[1] = 0.0; c[:, 1] = tg.randn(3, dtype=dt)
    attempt(setitem)
    def backward():  # autograd, where the package has it
        w = tg.randn(4, 5, dtype=dt).requires_grad_()
        ((a @ w).relu().softmax(-1).log().sum() + (w * w).mean()).backward()
        tg.cross_entropy(a @ w, tg.Tensor([0, 1, 2])).backward()
    attempt(backward)
    def embedding():  # an embedding lookup's backward (index_add) and gather, as in exercise 8
        t = tg.randn(5, 3, dtype=dt).requires_grad_()
        (t.index_select(0, tg.Tensor([0, 2, 2])).gather(1, tg.Tensor([[0], [1], [2]])).sum()).backward()
    attempt(embedding)
    def train():  # teenygrad.nn layers and every optimizer kernel, where the package has them
        from teenygrad import nn, optim
        m = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.LayerNorm(5), nn.Dropout(0.1), nn.Linear(5, 3)).to(dt)
        for opt in (optim.SGD(m.parameters(), 0.1), optim.SGD(m.parameters(), 0.1, momentum=0.9),
                    optim.Adam(m.parameters()), optim.AdamW(m.parameters())):
            opt.zero_grad()
            tg.cross_entropy(m(a), tg.Tensor([0, 1, 2])).backward()
            optim.clip_grad_norm(m.parameters(), 0.1)
            opt.step()
    attempt(train)
    def transformer():  # the fused ops of teenygrad.functional and a GPT step, on both kernel paths
        from teenygrad import functional as F
        from teenygrad.kernels import fused
        from teenygrad.gpt import GPT, GPTConfig
        for big in (False, True):
            fused.PARALLEL_MIN_WORK = 0 if big else 1 << 62
            x, w = tg.randn(2, 3, 12, dtype=dt).requires_grad_(), tg.randn(12, dtype=dt).requires_grad_()
            (F.layer_norm(x, w, w).sum() + F.rms_norm(x, w).sum() + F.causal_self_attention(x, 2).sum()
             + F.linear(x, tg.randn(5, 12, dtype=dt), w[:5]).sum() + F.gelu(x).sum()).backward()
        fused.PARALLEL_MIN_WORK = 1 << 16
        q = tg.randn(2, 2, 3, 4, dtype=dt).requires_grad_()  # composed attention on head batches (exercise 9)
        (F.causal_attention(q, q, q).transpose(1, 2).reshape(2, 3, 8).gelu().sum()
         + F.causal_attention(q[:, :, 2:], q, q).sum()).backward()
        if dt != tg.float32:
            return
        for cfg in (GPTConfig(vocab_size=7, block_size=4, n_layer=1, n_head=2, n_embd=4),
                    GPTConfig(vocab_size=7, block_size=4, n_layer=1, n_head=2, n_embd=4, norm="rms", act="relu",
                              bias=False, norm_weights=False, tie_weights=False)):
            model = GPT(cfg)
            model(tg.Tensor([[1, 2, 3]]), tg.Tensor([[2, 3, 4]]))[1].backward()
            model.generate([1, 2], 3, temperature=1.0)
            with F.unfused():  # the composed versions chapter 9 times against the fused ones
                model(tg.Tensor([[1, 2, 3]]), tg.Tensor([[2, 3, 4]]))[1].backward()
    attempt(transformer)
for x in (tg.arange(12).reshape(3, 4), tg.arange(12).reshape(3, 4).T):
    attempt(lambda: x + x)
    attempt(lambda: x * 2)
    attempt(lambda: x.sum(axis=0))
    attempt(lambda: x.max(axis=1))
    attempt(lambda: x.contiguous())
'''


def _key() -> str:
    digest = hashlib.sha256()
    for path in sorted((course.REPO / "teenygrad").rglob("*.py")):
        digest.update(path.relative_to(course.REPO).as_posix().encode())
        digest.update(path.read_bytes())
    digest.update(sys.version.encode())
    digest.update(str(course.REPO).encode())  # numba keys cache files by the source folder's path
    return digest.hexdigest()[:16]


def numba_cache(log=None) -> Path | None:
    """The warm cache for the current teenygrad source (built on first use); None if it cannot be built."""
    cache_root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "teenygrad" / "numba"
    done = cache_root / _key()
    if done.is_dir():
        return done
    cache_root.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=".warming-", dir=cache_root))
    if log:
        log("compiling teenygrad's kernels once for the sandboxes (cached for later runs)...")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(building), "PYTHONPATH": str(course.REPO)}
    proc = subprocess.run([sys.executable, "-c", WARM_UP], env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        shutil.rmtree(building, ignore_errors=True)
        return None  # grading still works, just slower: each sandbox compiles what it uses
    try:
        building.rename(done)
    except OSError:  # another grader finished first
        shutil.rmtree(building, ignore_errors=True)
    return done
