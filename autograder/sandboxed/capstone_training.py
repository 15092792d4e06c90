"""The capstone's training: `python capstone_training.py CONFIG.json`, run by `autograder.capstone` in a sandbox.

It installs the learner's pieces (`teenygrad.edition.load_mine` on the copy of mine/ in its work folder), then
trains chapter 9's two GPTs exactly as the chapter does, and saves their trained parameters (npz) and what
it did (run.json) in its output folder. It reports no loss that counts: the grader computes the held-out
losses itself from the parameters (autograder/judges/capstone.py). Nothing here is trusted once the
learner's code has run; the calls counted per piece are shown to the learner, never graded.

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


def train_shakespeare(tg, cfg, train_data: np.ndarray, steps: int, warmup: int, batch) -> tuple:
    """Chapter 9's Shakespeare GPT: AdamW, warmup then cosine decay, gradients clipped to norm 1."""
    from teenygrad import optim
    from teenygrad.gpt import GPT

    lr, min_lr = 2e-3, 2e-4
    tg.manual_seed(0)
    model = GPT(cfg)
    opt = optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.99), weight_decay=0.1)
    rng = np.random.default_rng(0)
    losses = []
    for step in range(steps):
        opt.lr = optim.lr_at(step, steps, lr, warmup=warmup, min_lr=min_lr)
        x, y = batch(train_data, rng)
        _, loss = model(tg.tensor(x), tg.tensor(y))
        opt.zero_grad()
        loss.backward()
        optim.clip_grad_norm(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    return model, losses


def main() -> None:
    config = json.loads(Path(sys.argv[1]).read_text())
    out = Path(config["out"])
    out.mkdir(parents=True, exist_ok=True)
    report = {"installed": [], "calls": {}, "seconds": {}}
    from judge_data import NAMES_CFG, batch, names_data, shakespeare_cfg, shakespeare_data

    import teenygrad as tg
    from teenygrad import edition

    names, shakespeare = names_data(), shakespeare_data()  # before the learner's code runs
    report["installed"] = [list(p) for p in edition.load_mine(Path(config["mine"]))]
    count_calls(edition, report["calls"])
    tg.tune()
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


if __name__ == "__main__":
    main()
