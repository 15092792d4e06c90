"""Hardware detection (teenygrad/kernels/cpu.py): feature flags -> vector unit -> micro-kernel shape, cache
sizes from a fake /sys directory, and matmul.py's MR x NR taken from the detected features."""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from teenygrad.kernels import cpu

mm = importlib.import_module("teenygrad.kernels.matmul")
REPO = Path(__file__).resolve().parent.parent

# Feature strings as LLVM reports them (abridged), and what they mean.
ZEN4 = "+64bit,+avx,+avx2,+avx512f,+avx512bw,+avx512vl,+fma,+sse,+sse2,-amx-tile"
HASWELL = "+64bit,+avx,+avx2,-avx512f,+fma,+sse,+sse2,+sse4.2"
SANDY_BRIDGE = "+64bit,+avx,-avx2,-avx512f,-fma,+sse,+sse2"
OLD_X86 = "+64bit,-avx,-avx2,-avx512f,-fma,+sse,+sse2"
ARM64 = "+neon,+fp-armv8,+v8a"

CASES = [  # (features, machine) -> (isa, bits, registers, fma, (MR, NR))
    (ZEN4, "x86_64", ("AVX-512", 512, 32, True, (6, 32))),
    (HASWELL, "x86_64", ("AVX2", 256, 16, True, (4, 16))),
    (HASWELL, "AMD64", ("AVX2", 256, 16, True, (4, 16))),          # Windows spells it AMD64
    (SANDY_BRIDGE, "x86_64", ("AVX", 256, 16, False, (4, 16))),
    (OLD_X86, "x86_64", ("SSE2", 128, 16, False, (4, 8))),
    ("", "x86_64", ("SSE2", 128, 16, False, (4, 8))),               # no features reported: SSE2 is in x86-64
    (ARM64, "aarch64", ("NEON", 128, 32, True, (4, 16))),
    ("", "arm64", ("NEON", 128, 32, True, (4, 16))),                # Apple silicon, features not reported
    ("", "riscv64", ("unknown", 128, 16, False, (4, 8))),           # not recognised: the stated assumption
]


def test_parse_features_keeps_only_enabled_ones():
    assert cpu.parse_features(ZEN4) == {"64bit", "avx", "avx2", "avx512f", "avx512bw", "avx512vl", "fma", "sse", "sse2"}
    assert cpu.parse_features("") == frozenset()
    assert cpu.parse_features("-avx512f,-fma") == frozenset()


@pytest.mark.parametrize("flags, machine, want", CASES)
def test_features_give_vector_unit_and_micro_kernel_shape(flags, machine, want):
    isa, bits, registers, fma, shape = want
    unit = cpu.vector_unit(cpu.parse_features(flags), machine)
    assert (unit.isa, unit.bits, unit.registers, unit.fma) == (isa, bits, registers, fma)
    assert unit.detected == (isa != "unknown")
    assert cpu.micro_kernel_shape(unit) == shape


@given(st.sampled_from([128, 256, 512, 1024]), st.integers(8, 64))
def test_micro_kernel_fits_the_registers(bits, registers):
    """Whatever the unit, the accumulators, a row of B and the MR broadcasts of A fit in its registers, in whole
    vectors; and no wider row, nor six rows where it took four, would."""
    unit = cpu.VectorUnit("test", bits, registers, True, True)
    mr, nr = cpu.micro_kernel_shape(unit)
    lanes = bits // 32
    vectors = nr // lanes
    assert mr in cpu.ROWS and nr % lanes == 0 and vectors >= 1
    assert nr <= max(cpu.MAX_NR, lanes)

    def fits(rows, v):
        return rows * v + v + rows <= registers

    assert fits(mr, vectors) or vectors == 1 and mr == min(cpu.ROWS)  # nothing fits: the smallest shape
    wider = 2 * vectors
    assert vectors == 4 or wider * lanes > cpu.MAX_NR or not any(fits(rows, wider) for rows in cpu.ROWS)
    assert mr == max(cpu.ROWS) or not fits(max(cpu.ROWS), vectors)


def test_matmul_shape_is_the_detected_hosts():
    name, features = cpu.compile_target()
    assert (mm.MR, mm.NR) == cpu.micro_kernel_shape(cpu.vector_unit(features, cpu.host().machine))


def _run_plain_python(env_extra: dict, code: str) -> str:
    """Run `code` in a fresh Python with TEENYGRAD_JIT=0 (plain-Python kernels: nothing is compiled, so
    numba's disk cache is neither read nor written) and extra environment variables."""
    env = {**os.environ, "TEENYGRAD_JIT": "0", **env_extra}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("features, mr, nr", [(HASWELL, 4, 16), (OLD_X86, 4, 8)]
                         if cpu.host().machine in ("x86_64", "AMD64") else [("+neon", 4, 16)])
def test_matmul_follows_the_features_numba_targets_and_stays_right(features, mr, nr):
    """Told to compile for another processor (NUMBA_CPU_FEATURES), matmul.py picks that processor's shape,
    and the tiled kernel with that shape is still right (against numpy, on edge sizes around MR and NR)."""
    code = (
        "import importlib, numpy as np\n"
        "mm = importlib.import_module('teenygrad.kernels.matmul')\n"
        "print(mm.MR, mm.NR)\n"
        "rng = np.random.default_rng(0)\n"
        "for m, k, n in [(1, 1, 1), (mm.MR + 1, 3, mm.NR + 1), (2 * mm.MR - 1, 5, 2 * mm.NR + 3), (4, 0, 3)]:\n"
        "    a = rng.standard_normal((m, k)).astype(np.float32)\n"
        "    b = rng.standard_normal((k, n)).astype(np.float32)\n"
        "    for fn in (mm.matmul_tiled, mm.matmul_parallel):\n"
        "        out = np.full((m, n), np.nan, np.float32)\n"
        "        fn(a, b, out)\n"
        "        assert np.allclose(out, a @ b, rtol=1e-5, atol=1e-5), (fn, m, k, n)\n"
        "        out[:] = np.nan\n"
        "        fn(a, np.ascontiguousarray(b.T).T, out)  # B as a transposed view: packed 8 depths at a time\n"
        "        assert np.allclose(out, a @ b, rtol=1e-5, atol=1e-5), (fn, m, k, n)\n"
    )
    assert _run_plain_python({"NUMBA_CPU_FEATURES": features}, code).split() == [str(mr), str(nr)]


# --- cache sizes ---------------------------------------------------------------------------------------

def _fake_cache_dir(root: Path, entries: list[tuple[int, str, str]]) -> Path:
    for i, (level, kind, size) in enumerate(entries):
        d = root / f"index{i}"
        d.mkdir(parents=True)
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
        (d / "coherency_line_size").write_text("64\n")
    return root


def test_linux_caches_from_a_fake_sys_directory(tmp_path):
    root = _fake_cache_dir(tmp_path, [(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K"),
                                      (3, "Unified", "36M")])
    assert cpu.linux_caches(root) == {"L1d": 48 << 10, "L1i": 32 << 10, "L2": 2 << 20, "L3": 36 << 20}
    assert cpu.linux_cache_line(root) == 64


def test_linux_caches_skip_what_cannot_be_read(tmp_path):
    root = _fake_cache_dir(tmp_path, [(1, "Data", "32K"), (2, "Unified", "garbage"), (3, "Unified", "")])
    (root / "index3").mkdir()  # an entry without files
    assert cpu.linux_caches(root) == {"L1d": 32 << 10}
    assert cpu.linux_caches(tmp_path / "missing") == {}
    assert cpu.linux_cache_line(tmp_path / "missing") is None


@pytest.mark.parametrize("text, size", [("32K", 32768), ("1024K", 1 << 20), ("1M", 1 << 20), ("2G", 2 << 30),
                                        ("512", 512), ("32k\n", 32768), ("", None), ("K", None), ("3.5M", None)])
def test_parse_size(text, size):
    assert cpu._parse_size(text) == size


@pytest.mark.parametrize("n, text", [(None, "unknown"), (512, "512 bytes"), (32768, "32 KiB"), (1 << 20, "1 MiB"),
                                     (3 << 19, "1.5 MiB"), (32 << 20, "32 MiB"), (1 << 30, "1 GiB")])
def test_format_bytes(n, text):
    assert cpu.format_bytes(n) == text


def test_which_cache_holds_what():
    zen4 = cpu.CPU("znver4", "x86_64", cpu.vector_unit(cpu.parse_features(ZEN4), "x86_64"), 2,
                   {"L1d": 32 << 10, "L1i": 32 << 10, "L2": 1 << 20, "L3": 32 << 20}, 64)
    assert [zen4.smallest_cache_holding(n) for n in (1, 32 << 10, (32 << 10) + 1, 2 << 20, 64 << 20)] == \
        ["L1d", "L1d", "L2", "L3", None]
    assert zen4.last_level_cache() == "L3"
    no_l3 = cpu.CPU("apple-m1", "arm64", cpu.vector_unit(frozenset(), "arm64"), 8, {"L1d": 64 << 10, "L2": 4 << 20})
    assert no_l3.last_level_cache() == "L2" and no_l3.smallest_cache_holding(8 << 20) is None
    unknown = cpu.CPU("generic", "riscv64", cpu.UNKNOWN, 1)
    assert unknown.last_level_cache() is None and unknown.smallest_cache_holding(1) is None
    assert unknown.cache("L2") is None


def test_host_is_consistent():
    h = cpu.host()
    assert h.cores >= 1 and h.vector.bits in (128, 256, 512)
    assert all(size > 0 for size in h.caches.values())
    if Path("/sys/devices/system/cpu/cpu0/cache").is_dir():
        assert h.caches == cpu.linux_caches()
