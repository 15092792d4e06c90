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

STEPS, B, T = 3, 2, 8
cfg = GPTConfig(vocab_size=11, block_size=T, n_layer=1, n_head=2, n_embd=16)
rng = np.random.default_rng(int(sys.argv[1]))
batches = [(rng.integers(0, cfg.vocab_size, (B, T)), rng.integers(0, cfg.vocab_size, (B, T))) for _ in range(STEPS)]
report = {}
for device in ("cpu", "cuda"):
    tg.manual_seed(0)
    model = GPT(cfg).to(device)
    opt = optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.99), weight_decay=0.1)
    losses, grads, norms, launches = [], [], [], []
    for step, (x, y) in enumerate(batches):
        if device == "cuda" and step == STEPS - 1:  # count the launches of one whole step
            counted = {name: (lambda fn: lambda *a: (launches.append(1), fn(*a))[1])(fn)
                       for name, fn in tg.kernels.on("cuda").items()}
            swap = tg.kernels.use("cuda", **counted)
            swap.__enter__()
        _, loss = model(tg.tensor(x, device=device), tg.tensor(y, device=device))
        opt.zero_grad()
        loss.backward()
        grads.append({name: p.grad.numpy().tolist() for name, p in model.named_parameters()})
        norms.append(optim.clip_grad_norm(model.parameters(), 0.5))
        opt.step()
        losses.append(loss.item())
        if device == "cuda" and step == STEPS - 1:
            swap.__exit__(None, None, None)
        if device == "cpu" and step == 1:
            after_two = {name: p.numpy().tolist() for name, p in model.named_parameters()}
    report[device] = {"losses": losses, "grads": grads, "norms": norms,
                      "weights": {name: p.numpy().tolist() for name, p in model.named_parameters()},
                      "devices": sorted({p.device for p in model.parameters()}), "launches": len(launches)}
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
    assert 20 < trained["cuda"]["launches"] < 400, trained["cuda"]["launches"]


def test_ops_on_two_devices_raise_one_error_naming_both(trained):
    assert "cpu" in trained["mixing"] and "cuda" in trained["mixing"] and "to(" in trained["mixing"]
