"""teenygrad trains on the GPU (issue 37): a tiny GPT on device="cuda", in numba-cuda's simulator, against the CPU.

The same model, weights and batches on both devices, several AdamW steps with gradient clipping, as chapter 9's loop
does them: every step's loss, every parameter's gradient and the weights after the last step must agree at float32
tolerance. numba.cuda decides once, when imported, whether it simulates, and the test workers must not import it, so
the GPU side runs in ONE child process with the simulator on; it also counts the kernel launches of one step.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO

CHILD = r'''
import json, os, sys
os.environ["TEENYGRAD_CUDA"] = "sim"
sys.setswitchinterval(5e-5)  # the simulator's threads wait at syncthreads holding the GIL: switch often (~5x faster)
import numpy as np
import teenygrad as tg
from teenygrad import optim
from teenygrad.gpt import GPT, GPTConfig
from teenygrad.kernels.cuda.launch import counted_launches

STEPS, B, T = 3, 2, 8
cfg = GPTConfig(vocab_size=11, block_size=T, n_layer=1, n_head=2, n_embd=16)
rng = np.random.default_rng(int(sys.argv[1]))
batches = [(rng.integers(0, cfg.vocab_size, (B, T)), rng.integers(0, cfg.vocab_size, (B, T))) for _ in range(STEPS)]
report = {}
for device in ("cpu", "cuda"):
    tg.manual_seed(0)
    model = GPT(cfg).to(device)
    opt = optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.99), weight_decay=0.1)
    losses, grads, norms, launches = [], [], [], {}
    for step, (x, y) in enumerate(batches):
        if device == "cuda" and step == STEPS - 1:  # count the launches of one whole step
            counting = counted_launches()
            launches = counting.__enter__()
        _, loss = model(tg.tensor(x, device=device), tg.tensor(y, device=device))
        opt.zero_grad()
        loss.backward()
        grads.append({name: p.grad.numpy().tolist() for name, p in model.named_parameters()})
        norms.append(optim.clip_grad_norm(model.parameters(), 0.5))
        opt.step()
        losses.append(loss.item())
        if device == "cuda" and step == STEPS - 1:
            counting.__exit__(None, None, None)
        if device == "cpu" and step == 1:
            after_two = {name: p.numpy().tolist() for name, p in model.named_parameters()}
    report[device] = {"losses": losses, "grads": grads, "norms": norms,
                      "weights": {name: p.numpy().tolist() for name, p in model.named_parameters()},
                      "devices": sorted({p.device for p in model.parameters()}), "launches": dict(launches)}
# the copies between the computer's memory and the GPU in one more step of the GPU's model (its batch already there)
from teenygrad.kernels.cuda.launch import counted_transfers
xs, ys = tg.tensor(batches[0][0], device="cuda"), tg.tensor(batches[0][1], device="cuda")
with counted_transfers() as moved:
    _, loss = model(xs, ys)
    opt.zero_grad()
    loss.backward()
    optim.clip_grad_norm(model.parameters(), 0.5)
    opt.step()
    loss.item()
report["transfers"] = dict(moved)
# Module.to moves the parameters, and the optimizer's state follows them: a step on the CPU, then the model moved and
# a second step on the GPU, against two steps on the CPU
tg.manual_seed(0)
model = GPT(cfg)
opt = optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.99), weight_decay=0.1)
for step, (x, y) in enumerate(batches[:2]):
    device = "cpu" if step == 0 else "cuda"
    if step == 1:
        model.to("cuda")
    _, loss = model(tg.tensor(x, device=device), tg.tensor(y, device=device))
    opt.zero_grad()
    loss.backward()
    optim.clip_grad_norm(model.parameters(), 0.5)
    opt.step()
report["moved"] = {"weights": {name: p.numpy().tolist() for name, p in model.named_parameters()},
                   "cpu_two_steps": after_two, "state": sorted({tg.devices.of(m) for m in [*opt.m.values(), *opt.v.values()]})}
# teenygrad's lock around the simulator's making of shared arrays (kernels/cuda/device.py): two arrays on two lines
# stay two, one line is one array for the whole block
from numba.cuda.simulator import kernelapi
from teenygrad.kernels.cuda.device import cuda


@cuda.jit
def two_arrays(out):
    a = cuda.shared.array(32, dtype=np.float32)
    b = cuda.shared.array(32, dtype=np.float32)
    t = cuda.threadIdx.x
    a[t] = t
    b[t] = -t
    cuda.syncthreads()
    out[cuda.blockIdx.x, t] = a[(t + 1) % 32] + 10 * b[(t + 2) % 32]


shared_out = np.zeros((3, 32), np.float32)
two_arrays[3, 32](shared_out)
t = np.arange(32)
report["shared"] = {"locked": getattr(kernelapi.FakeCUDAShared.array, "locked", False),
                    "right": bool((shared_out == (t + 1) % 32 - 10 * ((t + 2) % 32)).all())}
try:
    tg.tensor([1.0]) + tg.tensor([1.0], device="cuda")
except RuntimeError as e:
    report["mixing"] = str(e)
# On the GPU the optimizers update GROUP parameters a launch and the clipping's norm comes back in one copy: each
# optimizer over 21 parameters of mixed shapes (two groups), 3 steps with gradients drawn at random, some parameters
# without a gradient in some steps (so Adam's step counts differ between them), clipping every step, on both devices
from teenygrad.kernels.cuda import optim as gpu_optim

shapes = [(3,), (5, 4), (17,), (2, 2, 2), (1,), (9, 3), (40,)] * 3
draws = np.random.default_rng(int(sys.argv[1]) + 1)
values = [draws.normal(size=s).astype(np.float32) for s in shapes]
grads = [[draws.normal(size=s).astype(np.float32) * 3 if (k + step) % 5 else None for k, s in enumerate(shapes)]
         for step in range(3)]
makers = {"SGD": lambda ps: optim.SGD(ps, lr=0.1), "SGD momentum": lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9,
          weight_decay=0.01), "Adam": lambda ps: optim.Adam(ps, lr=0.1, weight_decay=0.01),
          "AdamW": lambda ps: optim.AdamW(ps, lr=0.1, weight_decay=0.1)}
report["optimizers"] = {}
for label, make in makers.items():
    result = {}
    for device in ("cpu", "cuda"):
        params = [tg.tensor(v, device=device, requires_grad=True) for v in values]
        opt, norms = make(params), []
        for step in range(3):
            for p, g in zip(params, grads[step]):
                p.grad = None if g is None else tg.tensor(g, device=device)
            with counted_launches() as launched:
                norms.append(optim.clip_grad_norm(params, 2.0))
                opt.step()
        result[device] = {"weights": [p.numpy().tolist() for p in params], "norms": norms, "launched": dict(launched),
                          "moved": all(not np.array_equal(p.numpy(), v) for p, v in zip(params, values))}
    report["optimizers"][label] = result
# a learner's own step, installed, runs on the GPU too (the group path is the book's)
calls = []


def step(self):
    calls.append(1)
    self.steps += 1
    for i, p in enumerate(self.params):
        if p.grad is not None:
            self._update(i, optim.flat_buffer(p), optim.grad_buffer(p))


params = [tg.tensor(v, device="cuda", requires_grad=True) for v in values]
for p, g in zip(params, grads[0]):
    p.grad = None if g is None else tg.tensor(g, device="cuda")
with tg.edition.installed("07-neural-nets", "optimizer", step):
    optim.AdamW(params, lr=0.1).step()
report["learners_step"] = {"calls": len(calls), "group": gpu_optim.GROUP}
print(json.dumps(report))
'''


@pytest.fixture(scope="module")
def trained() -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO), "TEENYGRAD_CUDA": "sim", "NUMBA_ENABLE_CUDASIM": "1"}
    proc = subprocess.run([sys.executable, "-c", CHILD, "7"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_tiny_gpt_trains_on_the_gpu_as_on_the_cpu(trained):
    cpu, gpu = trained["cpu"], trained["cuda"]
    assert gpu["devices"] == ["cuda"] and cpu["devices"] == ["cpu"]
    np.testing.assert_allclose(gpu["losses"], cpu["losses"], rtol=1e-5, atol=1e-5)
    assert cpu["losses"][-1] < cpu["losses"][0]  # it learns: the steps are real, not a no-op on both devices
    np.testing.assert_allclose(gpu["norms"], cpu["norms"], rtol=1e-4)
    assert max(cpu["norms"]) > 0.5  # clipping scaled some step's gradients
    for step, (g_cpu, g_gpu) in enumerate(zip(cpu["grads"], gpu["grads"])):
        assert g_cpu.keys() == g_gpu.keys()
        for name in g_cpu:
            np.testing.assert_allclose(g_gpu[name], g_cpu[name], rtol=1e-3, atol=1e-5, err_msg=f"step {step}: {name}")
    for name, w in cpu["weights"].items():
        np.testing.assert_allclose(gpu["weights"][name], w, rtol=1e-4, atol=1e-5, err_msg=name)


def test_a_model_moved_between_steps_takes_its_optimizers_state_along(trained):
    moved = trained["moved"]
    assert moved["state"] == ["cuda"]  # Adam's m and v moved after their parameters
    for name, w in moved["cpu_two_steps"].items():
        np.testing.assert_allclose(moved["weights"][name], w, rtol=1e-4, atol=1e-5, err_msg=name)


def test_the_simulators_shared_arrays_are_made_under_teenygrads_lock(trained):
    # unlocked, two threads of a launch's first block could each make the array and not share it (a launch's first
    # block gave garbage a few times in a thousand launches of this GPT's steps)
    assert trained["shared"] == {"locked": True, "right": True}


def test_a_step_is_a_countable_number_of_launches(trained):
    # one layer's step: embeddings, the block's fused ops and their backwards, the loss, clipping and AdamW
    launches = trained["cuda"]["launches"]
    assert 20 < sum(launches.values()) < 200, launches
    # the optimizer and the clipping: one launch each for the GPT's 16 parameters, not one a parameter
    assert launches["adam_group_kernel"] == 1 and launches["sum_of_squares_group_kernel"] == 1, launches
    assert "adam_kernel" not in launches and "sum_of_squares_kernel" not in launches, launches


def test_a_step_copies_nothing_to_the_gpu_and_reads_back_only_what_it_must(trained):
    """Every copy waits for the launches queued before it. A step's zeros, ones, positions and scalar operands are
    made on the GPU; what comes back: the three index checks' flags (two embeddings, the targets), the loss's
    gradient scale (cross-entropy's backward piece takes a float), the clipping's partial sums, and the loss."""
    assert trained["transfers"] == {"back: raise_if_set": 3, "back: item": 2, "back: sum_of_squares_group": 1}, \
        trained["transfers"]


@pytest.mark.parametrize("optimizer", ["SGD", "SGD momentum", "Adam", "AdamW"])
def test_the_optimizers_update_a_group_of_parameters_a_launch_as_on_the_cpu(trained, optimizer):
    """21 parameters, some without a gradient in some steps, clipped each step: the weights and norms agree with the
    CPU's, and a step is two launches of the update (21 parameters in groups of 16), not 21."""
    run = trained["optimizers"][optimizer]
    np.testing.assert_allclose(run["cuda"]["norms"], run["cpu"]["norms"], rtol=1e-5)
    assert max(run["cpu"]["norms"]) > 2.0  # the clipping scaled the gradients
    for k, (w_gpu, w_cpu) in enumerate(zip(run["cuda"]["weights"], run["cpu"]["weights"])):
        np.testing.assert_allclose(w_gpu, w_cpu, rtol=1e-5, atol=1e-6, err_msg=f"{optimizer}: parameter {k}")
    assert run["cpu"]["moved"] and run["cuda"]["moved"]  # every parameter stepped at least once
    update = "sgd_group_kernel" if optimizer.startswith("SGD") else "adam_group_kernel"
    with_grad = 21 - sum(1 for k in range(21) if (k + 2) % 5 == 0)  # the last step's parameters with a gradient
    groups = -(-with_grad // trained["learners_step"]["group"])
    assert run["cuda"]["launched"] == {update: groups, "sum_of_squares_group_kernel": groups,
                                       "scale_group_kernel": groups}, run["cuda"]["launched"]
    assert run["cpu"]["launched"] == {}  # the CPU takes its own path


def test_a_learners_own_step_still_runs_on_the_gpu(trained):
    assert trained["learners_step"]["calls"] == 1


def test_ops_on_two_devices_raise_one_error_naming_both(trained):
    assert "cpu" in trained["mixing"] and "cuda" in trained["mixing"] and "to(" in trained["mixing"]
