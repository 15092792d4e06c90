"""What this processor offers: vector width, registers, FMA, caches and cores, detected where possible.

Chapter 3 (chapters/03-kernels.ipynb) states these facts about the machine that builds the book, and
teenygrad/kernels/matmul.py sizes its register-tiled micro-kernel from them (`micro_kernel_shape`).

Where each fact comes from:
- vector width, vector registers, FMA: the CPU name and feature flags that numba's compiler (LLVM, through
  llvmlite) targets, i.e. the host processor unless NUMBA_CPU_NAME / NUMBA_CPU_FEATURES say otherwise.
  (LLVM may still prefer narrower vectors than the widest available, e.g. 256 bits on some Intel AVX-512
  processors; the micro-kernel's shape fits either way, since AVX-512 gives 32 registers of every width.)
  The register count is not a feature flag but follows from the instruction set: AVX-512 has 32 vector
  registers, AVX2 / AVX / SSE2 have 16, ARM64 (whose NEON is part of the architecture) has 32.
- cache sizes and the cache line: Linux's /sys/devices/system/cpu/cpu0/cache, macOS's `sysctl`;
  elsewhere they are unknown (None).
- cores: the CPUs this process may run on.
Nothing here is timed: the peak FLOPS and the bandwidth are measured in the chapter itself.
"""
from __future__ import annotations

import functools
import os
import platform
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

LINUX_CACHE_DIR = Path("/sys/devices/system/cpu/cpu0/cache")

# The micro-kernel's rows: matmul.py writes six accumulator rows (c0..c5) out by hand, and compiles the last
# two out when MR is 4, so MR is one of these, the first that fits the registers; the columns, NR, follow
# the vector width.
ROWS = (6, 4)
# Widest micro-kernel, in columns. Measured with matmul_tiled on AVX-512 (Zen 4), 6 x 64 against 6 x 32:
# within a few percent on square float32 products (512, 1024), but about half as fast on float64 (its 48
# accumulators spill out of the 32 registers) and on narrow products such as attention's (N = 16, 32 or 96:
# padding each panel to 64 columns computes zeros).
MAX_NR = 32


@dataclass(frozen=True)
class VectorUnit:
    """The SIMD instruction set numba compiles for."""
    isa: str          # "AVX-512", "AVX2", "AVX", "SSE2", "NEON", or "unknown"
    bits: int         # width of one vector register
    registers: int    # number of vector registers
    fma: bool         # fused multiply-add instructions (a * b + c in one instruction, rounded once)
    detected: bool    # False: the instruction set was not recognised and bits/registers are assumptions

    @property
    def float32_lanes(self) -> int:
        """float32 numbers per vector register (4 bytes each)."""
        return self.bits // 32


# Assumed when nothing is recognised (an unknown architecture): 128-bit vectors and 16 registers, the
# smallest SIMD unit of any current 64-bit processor, so the micro-kernel chosen for it fits everywhere.
UNKNOWN = VectorUnit("unknown", 128, 16, False, False)


def parse_features(flags: str) -> frozenset[str]:
    """LLVM's feature string, "+avx2,-avx512f,+fma,...", as the set of enabled features {"avx2", "fma", ...}."""
    return frozenset(f[1:].strip() for f in flags.split(",") if f.startswith("+"))


def vector_unit(features: frozenset[str] | set[str], machine: str) -> VectorUnit:
    """The vector unit from LLVM's enabled features and the machine's architecture (platform.machine())."""
    arch = machine.lower()
    if arch in ("x86_64", "amd64", "i386", "i686", "x86"):
        fma = "fma" in features or "avx512f" in features  # AVX-512F has its own FMA instructions
        if "avx512f" in features:
            return VectorUnit("AVX-512", 512, 32, fma, True)
        if "avx2" in features:
            return VectorUnit("AVX2", 256, 16, fma, True)
        if "avx" in features:
            return VectorUnit("AVX", 256, 16, fma, True)
        if "sse2" in features or arch in ("x86_64", "amd64"):  # every x86-64 processor has SSE2
            return VectorUnit("SSE2", 128, 16, fma, True)
    if arch in ("aarch64", "arm64"):  # NEON (128-bit, 32 registers, with FMA) is part of ARMv8-A
        return VectorUnit("NEON", 128, 32, True, True)
    return UNKNOWN


def micro_kernel_shape(unit: VectorUnit) -> tuple[int, int]:
    """(MR, NR): the block of C that matmul.py's micro-kernel keeps in registers, for this vector unit.

    Each row of the block is NR / lanes vectors of float32. Per step of the depth loop the kernel holds the
    MR x NR accumulators, one row of the packed B (NR / lanes vectors) and the MR broadcast values of A (LLVM
    loads all of them at the top of the step, before the multiply-adds), so
        MR * v + v + MR <= registers,   v = NR / lanes vectors per row.
    Take the most vectors per row (4, 2 or 1) that fit, up to MAX_NR columns, with six rows if they fit, else
    four: more independent accumulators hide the latency of the multiply-adds, and each loaded value of A is
    reused NR times. When they don't fit, LLVM spills accumulators to the stack inside the loop: on AVX2 the
    6 x 16 block (20 registers of 16) ran at 31-35 GFLOPS on one Zen 3 core, the 4 x 16 one at 45-57.
    AVX-512 -> 6 x 32, AVX2 -> 4 x 16, NEON (4 lanes, 32 registers) -> 4 x 16, SSE2 -> 4 x 8.
    (Sized for float32, the book's dtype. float64 has half the lanes, so the same code needs twice the
    registers: it still fits on AVX-512; elsewhere some accumulators spill to the stack, correct but slower.)
    """
    lanes = unit.float32_lanes
    for vectors in (4, 2, 1):
        for rows in ROWS:
            if vectors * lanes <= MAX_NR and rows * vectors + vectors + rows <= unit.registers:
                return rows, vectors * lanes
    return ROWS[-1], lanes


def _parse_size(text: str) -> int | None:
    """'32K' -> 32768, '1M' -> 1048576, '512' -> 512 (the format of /sys/.../cache/index*/size)."""
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in "KMG" else text
    return int(digits) * scale if digits.isdigit() else None


def linux_caches(root: Path = LINUX_CACHE_DIR) -> dict[str, int]:
    """Cache sizes in bytes from Linux's description of CPU 0's caches: {"L1d": ..., "L1i": ..., "L2": ..., "L3": ...}.
    A cache is named by its level and, for split level-1 caches, d (data) or i (instructions). Empty when
    the directory is missing or unreadable."""
    caches: dict[str, int] = {}
    for index in sorted(root.glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            size = _parse_size((index / "size").read_text())
        except OSError:
            continue
        if size is None:
            continue
        suffix = {"Data": "d", "Instruction": "i"}.get(kind, "")
        caches[f"L{level}{suffix}"] = size
    return caches


def linux_cache_line(root: Path = LINUX_CACHE_DIR) -> int | None:
    try:
        return int((root / "index0" / "coherency_line_size").read_text())
    except (OSError, ValueError):
        return None


def _sysctl(name: str) -> int | None:
    try:
        out = subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, timeout=5)
        return int(out.stdout.strip()) if out.returncode == 0 and int(out.stdout.strip() or 0) > 0 else None
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def macos_caches() -> dict[str, int]:
    """Cache sizes from macOS's sysctl (hw.l1dcachesize, ...); missing keys are left out."""
    names = {"L1d": "hw.l1dcachesize", "L1i": "hw.l1icachesize", "L2": "hw.l2cachesize", "L3": "hw.l3cachesize"}
    found = {level: _sysctl(key) for level, key in names.items()}
    return {level: size for level, size in found.items() if size}


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one, else all of them)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@dataclass(frozen=True)
class CPU:
    name: str                  # LLVM's name for the processor, e.g. "znver4", "haswell", "apple-m1"
    machine: str               # platform.machine(): "x86_64", "arm64", ...
    vector: VectorUnit
    cores: int
    caches: dict[str, int] = field(default_factory=dict)  # bytes, by level ("L1d", "L2", ...); absent = unknown
    cache_line: int | None = None

    def cache(self, level: str) -> int | None:
        """Size of one cache in bytes, or None if it could not be found out."""
        return self.caches.get(level)

    def last_level_cache(self) -> str | None:
        """The outermost known cache ("L3", else "L2", else "L1d"), or None when no size is known."""
        return next((level for level in ("L3", "L2", "L1d") if level in self.caches), None)

    def smallest_cache_holding(self, nbytes: int) -> str | None:
        """The innermost data cache ("L1d", "L2", "L3") at least `nbytes` large, or None (none is, or unknown)."""
        return next((level for level in ("L1d", "L2", "L3") if self.caches.get(level, -1) >= nbytes), None)


def compile_target() -> tuple[str, frozenset[str]]:
    """The CPU name and enabled features numba compiles for: llvmlite's get_host_cpu_name() and
    get_host_cpu_features(), as numba adjusts them (NUMBA_CPU_NAME, NUMBA_CPU_FEATURES, NUMBA_ENABLE_AVX).
    The features are empty where llvmlite cannot tell (some older macOS builds)."""
    import llvmlite.binding as llvm
    from numba.core import codegen, config

    name = config.CPU_NAME or llvm.get_host_cpu_name()
    flags = config.CPU_FEATURES if config.CPU_FEATURES is not None else codegen.get_host_cpu_features()
    return name, parse_features(flags)


@functools.cache
def host() -> CPU:
    """This machine, detected once per process."""
    name, features = compile_target()
    machine = platform.machine()
    if LINUX_CACHE_DIR.is_dir():
        caches, line = linux_caches(), linux_cache_line()
    elif platform.system() == "Darwin":
        caches, line = macos_caches(), _sysctl("hw.cachelinesize")
    else:
        caches, line = {}, None
    return CPU(name, machine, vector_unit(features, machine), usable_cores(), caches, line)


def format_bytes(n: int | None) -> str:
    """1048576 -> '1 MiB', 49152 -> '48 KiB', None -> 'unknown'."""
    if n is None:
        return "unknown"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            value = n / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} bytes"
