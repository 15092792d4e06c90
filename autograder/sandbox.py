"""The sandbox the learner's code runs in: `python -m autograder.sandbox SPEC.json -- COMMAND...` runs COMMAND
(a notebook's kernel, or a program of `autograder/sandboxed/`) in one.

nbgrader starts kernels from a kernelspec; the grader writes one whose argv goes through this module, so
the process nbgrader sees as "the kernel" is this wrapper, and the learner's code runs in a child that:

- lives in new pid, mount, network and IPC namespaces (when we are root): it sees only its own processes,
  has no network at all (the kernel talks to nbgrader over Unix sockets), cannot signal the grader, and its
  System V shared memory, semaphores and message queues vanish with it;
- is chrooted into a root filesystem built from an allowlist (system folders, Python, the virtualenv and
  the teenygrad package, read-only, plus its own work folder), so the course directory, gradebook,
  solutions, judges, tests and other submissions do not exist for it; /tmp and HOME are private;
- runs as an unprivileged uid of its own, so it can write nothing outside its work folder;
- has limits: address space and file size (rlimits), process count (cgroup pids.max or RLIMIT_NPROC),
  memory (cgroup memory limit when available), and disk: the grader mounts its work folder as a tmpfs of
  `disk_bytes` (`mount_work`), so a write past that fails with "No space left on device".

The grader prepares a sandbox (`prepare`: its spec, work folder and `Limits`) and starts a program in it
(`start_program` for the programs in `autograder/sandboxed/`; nbgrader starts a notebook's kernel through the
kernelspec `prepare` writes). The wrapper itself stays outside: it enforces the wall-clock limit by killing
the child's whole pid namespace (a numba loop ignores the kernel interrupt, so killing is the only sure stop),
watches the work folder's disk space, and writes what happened to `status_file` for the grader. Without root it
falls back to rlimits, a new session, the wall clock and a watched quota (the kernel is stopped once its work folder
holds more than `disk_bytes`), and says so in the status file; `sweep` then cannot tell the learner's
System V IPC objects from the user's own and leaves them alone.
"""
from __future__ import annotations

import ctypes
import json
import os
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC = 0x00020000, 0x20000000, 0x40000000, 0x08000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_BIND, MS_REMOUNT, MS_REC, MS_PRIVATE = 1, 2, 4, 4096, 32, 16384, 1 << 18
PR_SET_PDEATHSIG = 1
MNT_DETACH = 2
IPC_RMID = 0
CGROUP = Path("/sys/fs/cgroup")
DISK_FULL_BYTES = 2**20  # a work folder with less free space than this was filled
DISK_POLL_SECONDS = 1.0  # how often the non-root quota adds up the work folder

_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None, flags,
                       data.encode() if data else None), f"mount {target}")


def private_mounts() -> bool:
    """Give this process (the grading process) a mount namespace of its own, if we are root.

    Mounts made afterwards (the sandbox's tmpfs work folder) are seen by this process and its children
    (nbgrader, the sandbox wrapper) and vanish with them: nothing is left mounted on the machine even if the
    grading process is killed.
    """
    global _private
    if os.geteuid() != 0:
        return False
    try:
        _check(_libc.unshare(CLONE_NEWNS), "unshare")
        _mount("none", "/", None, MS_REC | MS_PRIVATE)
        _private = True
    except OSError:
        pass
    return _private


_private = False  # whether this process has its own mount namespace (private_mounts)


def mount_work(work: Path, size_bytes: int, uid: int) -> bool:
    """Mount a tmpfs of `size_bytes` on `work`, owned by `uid`; only as root in a private mount namespace
    (`private_mounts`), so that a crash can never leave it mounted on the machine."""
    if os.geteuid() != 0 or not _private:
        return False
    work.mkdir(parents=True, exist_ok=True)
    try:
        _mount("tmpfs", str(work), "tmpfs", MS_NOSUID | MS_NODEV,
               f"size={size_bytes},mode=0700,uid={uid},gid={uid}")
        return True
    except OSError:
        return False


def unmount(path: Path) -> None:
    _libc.umount2(str(path).encode(), MNT_DETACH)


def _folder_bytes(path: str) -> int:
    """What the files under `path` take on disk (the non-root quota)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_blocks * 512
            except OSError:
                pass
    return total


def _disk_free(path: str) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _build_root(spec: dict) -> Path:
    """A new root filesystem holding only what a kernel needs: an allowlist, not a blocklist.

    System folders, the Python installation, the virtualenv and the teenygrad package are bound in
    read-only; the work folder read-write; /tmp and /dev/shm are fresh tmpfs. Everything else (the course,
    the gradebook, solutions, judges, other submissions, wherever they live) simply does not exist inside.
    """
    root = Path(f"/dev/shm/teenygrad-root-{spec['id']}")
    root.mkdir(parents=True, exist_ok=True)
    _mount("tmpfs", str(root), "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=0755")
    # fresh /tmp and /proc first: the binds below may live under /tmp (a checkout in /tmp) and must stay on top
    for folder, fstype, data in (("tmp", "tmpfs", "size=256m,mode=1777"), ("proc", "proc", None)):
        (root / folder).mkdir(exist_ok=True)
        _mount(fstype, str(root / folder), fstype, MS_NOSUID | MS_NODEV, data)
    for path in spec["read_only"]:
        inside = root / path.lstrip("/")
        if os.path.islink(path):  # /bin -> usr/bin on merged-/usr systems
            inside.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(path), inside)
        elif os.path.exists(path):
            inside.mkdir(parents=True, exist_ok=True)
            _mount(path, str(inside), None, MS_BIND | MS_REC)
            _mount("none", str(inside), None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID)
    for source, target in spec.get("read_only_as", []):  # a folder bound where another was: the learner's edition
        inside = root / target.lstrip("/")
        inside.mkdir(parents=True, exist_ok=True)
        _mount(source, str(inside), None, MS_BIND | MS_REC)
        _mount("none", str(inside), None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID)
    (root / "dev").mkdir(exist_ok=True)
    _mount("/dev", str(root / "dev"), None, MS_BIND | MS_REC)  # /dev/null, /dev/urandom
    _mount("tmpfs", str(root / "dev" / "shm"), "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777")
    work = root / spec["work_dir"].lstrip("/")
    work.mkdir(parents=True, exist_ok=True)
    _mount(spec["work_dir"], str(work), None, MS_BIND | MS_REC)  # with its grading tmpfs
    return root


def _chroot_into(root: Path) -> None:
    os.chdir(root)
    os.chroot(".")
    os.chdir("/")


def _cgroups(spec: dict, pid: int) -> list[Path]:
    """Put `pid` in fresh pids and memory cgroups (cgroup v1) when the machine lets us; return them."""
    made = []
    name = f"teenygrad-{spec['id']}"
    for controller, settings in (("pids", {"pids.max": spec["max_processes"]}),
                                 ("memory", {"memory.limit_in_bytes": spec["memory_bytes"],
                                             "memory.memsw.limit_in_bytes": spec["memory_bytes"]})):
        group = CGROUP / controller / name
        try:
            group.mkdir(exist_ok=True)
            for key, value in settings.items():
                try:
                    (group / key).write_text(str(value))
                except OSError:
                    pass  # memsw exists only with swap accounting
            (group / "cgroup.procs").write_text(str(pid))
            made.append(group)
        except OSError:
            continue
    return made


def _child(spec: dict, argv: list[str], isolated: bool, ready: int) -> None:
    """In the child: finish the sandbox, drop privileges, become the kernel. Never returns."""
    try:
        os.read(ready, 1)  # wait until the wrapper has put us in our cgroups
        os.close(ready)
        work = spec["work_dir"]
        if isolated:
            # our own mounts and no network; the wrapper keeps its view to write the status file
            _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC), "unshare")
            _mount("none", "/", None, MS_REC | MS_PRIVATE)
            _chroot_into(_build_root(spec))
        os.chdir(work)
        limits = {resource.RLIMIT_AS: spec["address_space_bytes"], resource.RLIMIT_FSIZE: spec["file_bytes"],
                  resource.RLIMIT_CORE: 0, resource.RLIMIT_NPROC: spec["max_processes"]}
        os.setsid()  # its own process group: kill(0, ...) inside cannot reach the wrapper's
        if isolated:
            os.setgroups([])
            os.setgid(spec["uid"])
            os.setuid(spec["uid"])
        # after setuid, which clears it: if the wrapper dies, the kernel (pid 1 of its namespace, and with
        # it everything inside) gets SIGKILL
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != spec["_wrapper_pid"] and not isolated:
            os._exit(1)
        for which, value in limits.items():
            resource.setrlimit(which, (value, value))
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "PYTHONPATH")}
        env.update(spec["env"])
        env.update(HOME=spec["home"], TMPDIR="/tmp" if isolated else spec["home"], PYTHONNOUSERSITE="1")
        os.execve(argv[0], argv, env)
    except BaseException as e:  # the grader reads the reason from the kernel never answering + stderr
        print(f"sandbox: could not start the kernel: {e}", file=sys.stderr, flush=True)
        os._exit(127)


def _write_status(spec: dict, **status) -> None:
    path = Path(spec["status_file"])
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(status))
    tmp.replace(path)


def run(spec: dict, argv: list[str]) -> int:
    # the connection file nbgrader wrote is readable by root only: hand the sandbox its own copy
    if "-f" in argv:
        i = argv.index("-f") + 1
        own = Path(spec["work_dir"]) / ".kernel-connection.json"
        shutil.copyfile(argv[i], own)
        os.chown(own, spec["uid"], spec["uid"]) if os.geteuid() == 0 else None
        argv = argv[:i] + [str(own)] + argv[i + 1:]

    isolated = os.geteuid() == 0 and spec.get("isolate", True)
    spec["_wrapper_pid"] = os.getpid()
    if isolated:
        try:
            _check(_libc.unshare(CLONE_NEWPID), "unshare")  # our next child is pid 1 of a new namespace
        except OSError:
            isolated = False
    start = time.monotonic()
    ready, go = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(go)
        _child(spec, argv, isolated, ready)
    os.close(ready)
    groups = _cgroups(spec, pid) if isolated else []
    os.write(go, b"1")
    os.close(go)

    def interrupt(signum, _frame):  # nbgrader interrupts "the kernel": pass it on
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    def stop(signum, _frame):  # nbgrader shuts "the kernel" down: tear the whole sandbox down
        _kill(pid, isolated)

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, stop)
    deadline = start + spec["wall_seconds"]
    outcome, code, disk_full, next_poll = "exited", 0, False, start
    work, disk_bytes, mounted = spec["work_dir"], spec.get("disk_bytes"), spec.get("disk_mounted", False)
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(status)
            break
        now = time.monotonic()
        if now > deadline:
            outcome = "timeout"
        elif disk_bytes and mounted:  # the tmpfs refuses writes past its size: note that it was hit
            disk_full = disk_full or _disk_free(work) < DISK_FULL_BYTES
        elif disk_bytes and now >= next_poll:  # no tmpfs: add the folder up now and then, stop it past the quota
            next_poll = now + DISK_POLL_SECONDS
            if _folder_bytes(work) > disk_bytes:
                outcome = "disk"
        if outcome != "exited":
            _kill(pid, isolated)
            os.waitpid(pid, 0)
            code = -signal.SIGKILL
            break
        time.sleep(0.05)
    if outcome == "exited" and code == -signal.SIGKILL and any(_oom(g) for g in groups):
        outcome = "memory"
    disk = "tmpfs" if mounted else "watched quota"
    _write_status(spec, outcome=outcome, exit_code=code, seconds=round(time.monotonic() - start, 2),
                  disk_full=disk_full or outcome == "disk",
                  isolation=f"namespaces+uid+cgroups+{disk}" if isolated else f"rlimits+session+{disk} (not root)")
    for group in groups:
        _remove_cgroup(group)
    shutil.rmtree(f"/dev/shm/teenygrad-root-{spec['id']}", ignore_errors=True)  # empty mount points
    return 0 if code == 0 else 1


def _kill(pid: int, isolated: bool) -> None:
    try:
        if isolated:
            os.kill(pid, signal.SIGKILL)  # pid 1 of its namespace: the kernel kills everything inside
        else:
            os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _oom(group: Path) -> bool:
    try:
        return "oom_kill 0" not in (group / "memory.oom_control").read_text() or int(
            (group / "memory.failcnt").read_text()) > 0
    except (OSError, ValueError):
        return False


def _remove_cgroup(group: Path) -> None:
    for _ in range(50):
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)


def _ipc_objects(uid: int) -> list[tuple[str, int]]:
    """(kind, id) of every System V shared memory segment, message queue and semaphore set `uid` owns or made."""
    found = []
    for kind in ("shm", "msg", "sem"):
        try:
            lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        except OSError:
            continue
        header = lines[0].split() if lines else []
        for line in lines[1:]:
            row = dict(zip(header, line.split()))
            if uid in (int(row.get("uid", -1)), int(row.get("cuid", -1))):
                found.append((kind, int(row[{"shm": "shmid", "msg": "msqid", "sem": "semid"}[kind]])))
    return found


def remove_ipc(uid: int) -> int:
    """Remove every System V IPC object of `uid` in our IPC namespace; return how many there were.

    The sandbox has an IPC namespace of its own, whose objects vanish with its last process; this catches
    whatever was made outside one (a machine where unsharing IPC failed)."""
    objects = _ipc_objects(uid)
    for kind, ident in objects:
        if kind == "shm":
            _libc.shmctl(ident, IPC_RMID, None)
        elif kind == "msg":
            _libc.msgctl(ident, IPC_RMID, None)
        else:
            _libc.semctl(ident, 0, IPC_RMID)
    return len(objects)


def sweep(spec: dict) -> int:
    """Kill whatever still runs as the sandbox's own uid, remove its System V IPC objects and its cgroups:
    the grader's last word.

    Every sandbox gets a uid of its own, so this touches nothing else. Returns how many processes and IPC
    objects were left behind.
    """
    killed = 0
    if os.geteuid() != 0 or not spec.get("uid"):
        return 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == spec["uid"]:
                    os.kill(int(entry), signal.SIGKILL)
                    killed += 1
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                pass
    killed += remove_ipc(spec["uid"])  # after the kills: a process still running could make another
    for controller in ("pids", "memory"):
        _remove_cgroup(CGROUP / controller / f"teenygrad-{spec['id']}")
    shutil.rmtree(f"/dev/shm/teenygrad-root-{spec['id']}", ignore_errors=True)
    return killed


# ---- the grader's side: a sandbox prepared, and a program started in it -----------------------------------------

KERNEL_NAME = "teenygrad-sandbox"  # the kernelspec `prepare` writes for nbgrader
GRADING_DIR_BYTES = 128 * 2**20  # the hidden tests' cases and results: a tmpfs of its own, so a notebook
# that fills its work folder is still graded on what it computed
PROGRAMS = Path(__file__).with_name("sandboxed")  # the only programs started inside a sandbox (start_program)
# Every sandbox runs GPU kernels (teenygrad.kernels.cuda, exercise 11) in numba-cuda's simulator, GPU or not: a
# learner's kernel is graded on the same machine everywhere (the simulator checks bounds, counts loads, and runs
# the same on a grading machine with a GPU as without), and the learner's process never chooses. numba reads
# NUMBA_ENABLE_CUDASIM once, when numba.cuda is first imported, so it is set before the process starts: a notebook
# that imports numba.cuda itself, before teenygrad, gets the simulator too.
SIMULATED_GPU = {"TEENYGRAD_CUDA": "sim", "NUMBA_ENABLE_CUDASIM": "1"}


def thread_budget() -> int:
    """The threads this grader may use: NUMBA_NUM_THREADS when it was given one, else every core it may run on."""
    given = os.environ.get("NUMBA_NUM_THREADS", "")
    return int(given) if given.isdigit() and int(given) > 0 else len(os.sched_getaffinity(0))


@dataclass
class Limits:
    """What one submission may use. The defaults grade any chapter's exercise comfortably on 2 cores."""

    wall_seconds: int = 900  # the whole notebook, enforced by killing the kernel's process tree
    cell_seconds: int = 300  # one cell, enforced by nbgrader (an interrupt, which pure Python obeys)
    memory_bytes: int = 4 * 2**30
    max_processes: int = 64
    file_bytes: int = 256 * 2**20
    disk_bytes: int = 2**30  # everything the notebook writes into its work folder (HOME, the current folder)
    # numba's and OpenMP's threads in the kernel. Jobs graded at once share the budget (batch.grade_all): two
    # kernels that each thread a loop over every core stall each other, since a parallel loop ends only when
    # its slowest thread does, and a thread that has lost its core waits a whole time slice to get it back
    threads: int = field(default_factory=thread_budget)

    def shared_by(self, jobs: int) -> Limits:
        """These limits for each of `jobs` gradings run at once: the same, but a share of the threads."""
        return replace(self, threads=max(1, self.threads // max(1, jobs)))


@dataclass
class Box:
    """One prepared sandbox: its folder (spec.json, status.json) and its spec (the work folder, uid, limits)."""

    folder: Path
    spec: dict

    @property
    def work(self) -> Path:
        return Path(self.spec["work_dir"])

    @property
    def spec_file(self) -> Path:
        return self.folder / "spec.json"

    def save(self) -> None:
        self.spec_file.write_text(json.dumps(self.spec))

    def status(self) -> dict:
        """What the wrapper wrote when the program ended ({} if it wrote nothing)."""
        path = Path(self.spec["status_file"])
        return json.loads(path.read_text()) if path.exists() else {}


def give_to(path: Path, uid: int) -> None:
    """Make `path` (and everything under it) the sandbox uid's, when we are root."""
    if os.geteuid() != 0:
        return
    for dirpath, _dirs, files in os.walk(path):
        os.chown(dirpath, uid, uid)
        for f in files:
            os.chown(os.path.join(dirpath, f), uid, uid)


def prepare(private: Path, env: dict, limits: Limits, numba_cache: str | None = None, name: str = "sandbox",
            kernel: bool = True, edition: str | None = None) -> Box:
    """Write the spec (and, with `kernel`, nbgrader's kernelspec) of a sandbox in `private`/`name`.

    `edition`: a learner's edition of teenygrad (`caches.learner_edition`), bound in place of the package. As
    root the work folder is a tmpfs of `limits.disk_bytes`, mounted in this process's own mount namespace
    (`private_mounts`); the caller unmounts `box.work` and `box.work / "grading"` when done."""
    from autograder.course import REPO

    root = os.geteuid() == 0
    uid = 100000 + os.getpid() % 50000 if root else os.getuid()  # one uid per grading process: no sharing
    folder = private / name
    work = folder / "work"
    mounted = mount_work(work, limits.disk_bytes, uid) and mount_work(work / "grading", GRADING_DIR_BYTES, uid)
    for sub in ("home", "ipc", "grading"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    if numba_cache and Path(numba_cache).is_dir():  # a copy: nothing compiled inside leaks to the next one
        shutil.copytree(numba_cache, work / "numba-cache")
    (work / "numba-cache").mkdir(exist_ok=True)
    os.chmod(private, 0o711)
    os.chmod(folder, 0o711)
    python_home = str(Path(os.path.realpath(sys.executable)).parent.parent)
    box = Box(folder, {
        "id": f"{os.getpid()}-{secrets.token_hex(4)}", "uid": uid, "work_dir": str(work), "home": str(work / "home"),
        # a virtualenv that is a symlink (a worktree's .venv) is bound as the link and the folder it points to
        "read_only": ["/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/sys", python_home,
                      *dict.fromkeys([sys.prefix, os.path.realpath(sys.prefix)]),
                      *([] if edition else [str(REPO / "teenygrad")])],
        "read_only_as": [[edition, str(REPO / "teenygrad")]] if edition else [],
        "env": {**env, **SIMULATED_GPU, "NUMBA_CACHE_DIR": str(work / "numba-cache"), "MPLBACKEND": "Agg",
                "OMP_NUM_THREADS": str(limits.threads), "NUMBA_NUM_THREADS": str(limits.threads),
                "PYTHONPATH": str(REPO),
                "GOMP_SPINCOUNT": "10000"},  # idle OpenMP threads sleep soon: other jobs share the cores (tuning.py)
        "wall_seconds": limits.wall_seconds, "address_space_bytes": limits.memory_bytes,
        "memory_bytes": limits.memory_bytes + 2**29, "max_processes": limits.max_processes,
        "file_bytes": limits.file_bytes, "status_file": str(folder / "status.json"),
        "disk_bytes": limits.disk_bytes, "disk_mounted": mounted,
    })
    box.save()
    if kernel:
        kernel_dir = private / "jupyter" / "kernels" / KERNEL_NAME
        kernel_dir.mkdir(parents=True)
        argv = [sys.executable, "-m", "autograder.sandbox", str(box.spec_file), "--",
                sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        (kernel_dir / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "teenygrad sandbox",
                                                            "language": "python"}))
    give_to(work, uid)
    if root:
        os.chmod(work, 0o700)
    return box


def start_program(box: Box, program: str, config: dict, files: dict[str, Path] | None = None,
                  **popen) -> subprocess.Popen:
    """Start `autograder/sandboxed/<program>.py CONFIG.json` in `box`, through the wrapper; `files` go beside it.

    Every program that runs inside a sandbox starts this one way: the program (and `files`, {name: source}) is
    copied into the sandbox's work folder and run from there, its config beside it. The autograder package is
    not in the sandbox at all (its judges are the hidden half of the tests), so nothing is imported from it
    there, and the sandbox's allowlist stays as it is for a notebook's kernel."""
    work = box.work
    for name, source in {f"{program}.py": PROGRAMS / f"{program}.py", **(files or {})}.items():
        shutil.copyfile(source, work / name)
        give_to(work / name, box.spec["uid"])
    (work / "config.json").write_text(json.dumps(config))
    give_to(work / "config.json", box.spec["uid"])
    box.save()
    return subprocess.Popen([sys.executable, "-m", "autograder.sandbox", str(box.spec_file), "--",
                             sys.executable, str(work / f"{program}.py"), str(work / "config.json")], **popen)


def main() -> int:
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        print("usage: python -m autograder.sandbox SPEC.json -- KERNEL COMMAND...", file=sys.stderr)
        return 2
    spec = json.loads(Path(sys.argv[1]).read_text())
    return run(spec, sys.argv[3:])


if __name__ == "__main__":
    sys.exit(main())
