"""The capstone's training: `python capstone_training.py CONFIG.json`, run by `autograder.capstone` in a sandbox.

It installs the learner's pieces (`teenygrad.edition.load_mine` on the copy of mine/ in its work folder), then
trains chapter 9's two GPTs exactly as the chapter does and samples text from them, trains chapter 10's twins (one
model's copies, side by side, one by the eager step and one by the step through `tg.compile`), and saves the
trained parameters (npz) and what it did (run.json) in its output folder. It reports no loss that counts: the
grader computes the held-out losses itself from the parameters (autograder/judges/capstone.py). Nothing here is
trusted once the learner's code has run; the calls counted per piece and the samples are shown to the learner,
never graded.

Started like every program in this folder (`autograder.sandbox.start_program`: copied into the sandbox's work
folder and run from there, with judges/capstone.py beside it as judge_data.py for the chapter's data and
configurations); it needs numpy and teenygrad.
"""
import functools
import json
import sys
import time
from pathlib import Path

import numpy as np


def count_calls(edition, calls: dict) -> None:
    """Install a counting wrapper of every function of the learner's, so the table can show that it ran."""
    for (assignment, part, _name), fn in edition.installed_functions().items():
        label = f"{assignment}/{part}"

        @functools.wraps(fn)
        def counted(*args, _fn=fn, _label=label, **kwargs):
            calls[_label] = calls.get(_label, 0) + 1
            return _fn(*args, **kwargs)
        edition.install(assignment, part, counted, origin="mine/, counted")


def train_names(tg, cfg, train: list, steps: int, lr: float = 0.01) -> tuple:
    """Chapter 9's names GPT: one name per step, Adam, the learning rate falling linearly to 0."""
    from teenygrad import optim
    from teenygrad.gpt import GPT

    tg.manual_seed(0)
    model = GPT(cfg)
    opt = optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.99))
    losses = []
    for step in range(steps):
        tokens = train[step % len(train)]
        opt.lr = optim.lr_at(step, steps, lr, kind="linear")
        _, loss = model(tg.tensor([tokens[:-1]]), tg.tensor([tokens[1:]]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return model, losses


SHAKESPEARE_LR, SHAKESPEARE_MIN_LR = 2e-3, 2e-4  # chapter 9's recipe: the peak and the floor of the schedule


def shakespeare_step(model, opt):
    """Chapter 9's Shakespeare training step: forward, backward, gradients clipped to norm 1, AdamW's update."""
    from teenygrad import optim

    def step(x, y):
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        optim.clip_grad_norm(model.parameters(), 1.0)
        opt.step()
        return loss
    return step


def adamw(model):
    from teenygrad import optim

    return optim.AdamW(model.parameters(), lr=SHAKESPEARE_LR, betas=(0.9, 0.99), weight_decay=0.1)


def set_lr(opts: list, step: int, total: int, warmup: int) -> None:
    """Warmup then cosine decay over `total` steps (a compiled step reads its optimizer's lr at every call)."""
    from teenygrad import optim

    for opt in opts:
        opt.lr = optim.lr_at(step, total, SHAKESPEARE_LR, warmup=warmup, min_lr=SHAKESPEARE_MIN_LR)


def train_shakespeare(tg, cfg, train_data: np.ndarray, steps: int, warmup: int, batch) -> tuple:
    """Chapter 9's Shakespeare GPT: AdamW, warmup then cosine decay, gradients clipped to norm 1."""
    from teenygrad.gpt import GPT

    tg.manual_seed(0)
    model = GPT(cfg)
    opt = adamw(model)
    step_of = shakespeare_step(model, opt)
    rng = np.random.default_rng(0)
    losses = []
    for step in range(steps):
        set_lr([opt], step, steps, warmup)
        x, y = batch(train_data, rng)
        losses.append(step_of(tg.tensor(x), tg.tensor(y)).item())
    return model, losses


def compiled_twins(tg, cfg, train_data: np.ndarray, steps: int, total: int, warmup: int, batch) -> tuple:
    """Chapter 10's check of a compiled step: two copies of one model from the same weights, trained side by side
    on the same batches for the first `steps` steps of the Shakespeare recipe (of `total`), one by the eager step
    and one by the same step through tg.compile: the learner's passes, fusion rules and code generation when mine/
    has them. Returns the two models, each one's losses and how often the compiled step was traced."""
    from teenygrad.gpt import GPT

    tg.manual_seed(0)
    eager_model, compiled_model = GPT(cfg), GPT(cfg)
    compiled_model.load_state_dict(eager_model.state_dict())
    opts = [adamw(eager_model), adamw(compiled_model)]
    eager = shakespeare_step(eager_model, opts[0])
    compiled = tg.compile(shakespeare_step(compiled_model, opts[1]))
    rng = np.random.default_rng(0)
    losses = {"eager": [], "compiled": []}
    for step in range(steps):
        set_lr(opts, step, total, warmup)
        x, y = batch(train_data, rng)
        losses["eager"].append(eager(tg.tensor(x), tg.tensor(y)).item())
        losses["compiled"].append(compiled(tg.tensor(x), tg.tensor(y)).item())
    return eager_model, compiled_model, losses, compiled.traces


def sample_text(model, start: list[int], itos, n: int, temperature: float, seed: int) -> str:
    """n characters drawn from a trained model after `start` (GPT.generate: the learner's draw when mine/ has it)."""
    ids = model.generate(start, n, temperature=temperature, rng=np.random.default_rng(seed))
    return "".join(itos[i] for i in ids)


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    out = Path(config["out"])
    out.mkdir(parents=True, exist_ok=True)
    report = {"installed": [], "calls": {}, "seconds": {}}
    from judge_data import NAMES_CFG, batch, names_data, shakespeare_cfg, shakespeare_data, twin_cfg

    import teenygrad as tg
    from teenygrad import edition

    names, shakespeare = names_data(), shakespeare_data()  # before the learner's code runs
    report["installed"] = [list(p) for p in edition.load_mine(Path(config["mine"]))]
    count_calls(edition, report["calls"])
    tg.tune()
    newline = shakespeare.chars.index("\n")
    samples = {"names": lambda m: [sample_text(m, [0], names.itos, NAMES_CFG.block_size, 1.0, seed).split(".")[0]
                                   for seed in range(8)],  # a name ends at its first boundary
               "shakespeare": lambda m: sample_text(m, [newline], shakespeare.chars, 240, 0.8, 0)}
    for name, train in (
            ("names", lambda: train_names(tg, NAMES_CFG, names.train, config["names_steps"])),
            ("shakespeare", lambda: train_shakespeare(tg, shakespeare_cfg(len(shakespeare.chars)), shakespeare.train,
                                                      config["shakespeare_steps"], config["warmup"], batch))):
        start = time.perf_counter()
        model, losses = train()
        report["seconds"][name] = round(time.perf_counter() - start, 2)
        report[f"{name}_train_loss"] = float(np.mean(losses[-50:])) if losses else None
        np.savez(out / f"{name}.npz", **{k: np.asarray(v) for k, v in model.state_dict().items()})
        (out / "run.json").write_text(json.dumps(report))  # after each model: a later failure keeps this one
        report.setdefault("samples", {})[name] = samples[name](model)
        (out / "run.json").write_text(json.dumps(report))
    start = time.perf_counter()
    eager, compiled, losses, traces = compiled_twins(
        tg, twin_cfg(len(shakespeare.chars), config["twin_model"]), shakespeare.train, config["twin_steps"],
        config["shakespeare_steps"], config["warmup"], batch)
    report["seconds"]["compiled twins"] = round(time.perf_counter() - start, 2)
    report["twin_losses"], report["traces"] = losses, traces
    for name, model in (("twin_eager", eager), ("twin_compiled", compiled)):
        np.savez(out / f"{name}.npz", **{k: np.asarray(v) for k, v in model.state_dict().items()})
    (out / "run.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main()
