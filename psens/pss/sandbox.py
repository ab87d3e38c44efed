"""Running untrusted Python (a model's HumanEval completion) in a separate, confined process.

Each program runs in a fresh ``python`` process (the base interpreter, without the caller's
virtual environment), never in the caller's, confined by two layers:

* **the OS sandbox** — ``bwrap`` (bubblewrap) when it is installed and can create
  namespaces here (probed once per process): no network (its own, empty network
  namespace), its own PID namespace (every process it starts dies with it), its own user
  namespace with all capabilities dropped, a read-only view of only what Python needs (the
  shared libraries and the interpreter's own files: no shell, no home, no project), the
  program's files read-only, a private 16 MiB ``/tmp`` as the only writable place, a new
  session, killed when the caller dies. This is the security boundary.
* **the guard**, in both modes — resource limits set by the child before any untrusted
  line runs (CPU seconds, address space, file size, no core files, one process: no
  ``fork`` where the kernel enforces it, which it does not for root), and an audit hook
  (PEP 578) refusing sockets, new processes, ``ctypes``, ``sqlite3``, changing limits, the
  garbage collector's object lists and every file write (opening for writing, removing,
  renaming, creating folders). The hook's lists live in a closure, not in a module a
  program can import.

Without ``bwrap`` (or where it cannot create namespaces, as in some containers) only the
guard runs, and psens warns once: **the guard alone is not a security boundary** (code in
the same process can get around an audit hook, e.g. by loading an extension module by
path). In both modes the caller's side holds: the wall-time limit (the process group is
killed; every process the program started is found and killed, by its PID namespace under
``bwrap`` and by a marker in its environment otherwise), bounded output (stdout and stderr
go to files limited by the file-size limit, and only their last 64 KiB are read back), and
a result written to a file descriptor the parent reads at most 4 MiB of.

References
----------
.. [1] Steve Dower and Christian Heimes. "PEP 578 – Python Runtime Audit Hooks." 2018.
   https://peps.python.org/pep-0578/
.. [2] bubblewrap, "Unprivileged sandboxing tool", https://github.com/containers/bubblewrap
"""

from __future__ import annotations

import functools
import os
import secrets
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["OUTPUT_CAP", "RESULT_CAP", "Outcome", "run_python", "sandbox_mode"]

#: bytes of stdout / stderr read back (their tails)
OUTPUT_CAP = 64 << 10
#: bytes of the result file read back; also the child's file-size limit
RESULT_CAP = 4 << 20
#: the environment variable marking every process a sandboxed program starts
TAG = "PSENS_SANDBOX"

#: Set in the child before anything else: limits, the audit hook, then the program. The
#: program's own code is in ``_PROGRAM`` (run with ``_ARGS``: a list of strings), with the
#: result file descriptor ``_RESULT``.
_PRELUDE = r"""
import sys
sys.path[:] = [p for p in sys.path if p]  # not the working folder
def _limits(cpu, memory, fsize, nproc):
    import resource
    for kind, value in ((resource.RLIMIT_CPU, cpu), (resource.RLIMIT_AS, memory),
                        (resource.RLIMIT_FSIZE, fsize), (resource.RLIMIT_CORE, 0),
                        (resource.RLIMIT_NPROC, nproc)):
        try:
            resource.setrlimit(kind, (value, value))
        except (ValueError, OSError):
            pass
def _guard(wflags):
    blocked = ("socket.", "subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
               "os.fork", "os.forkpty", "pty.", "ctypes.", "os.remove", "os.rename",
               "os.rmdir", "os.mkdir", "os.symlink", "os.link", "os.truncate", "os.chmod",
               "os.chown", "os.utime", "shutil.", "os.putenv", "os.unsetenv", "os.kill",
               "os.killpg", "signal.pthread_kill", "sqlite3.", "resource.", "gc.get_",
               "sys.addaudithook", "sys.setprofile", "sys.settrace", "_xxsubinterpreters.")
    modules = frozenset(("_posixsubprocess", "_ctypes", "ctypes", "_testcapi",
                         "_testinternalcapi", "_xxsubinterpreters", "_sqlite3", "sqlite3"))
    def hook(event, args):
        if event.startswith(blocked) or (event == "import" and args[0] in modules):
            name = args[0] if event == "import" else event
            raise PermissionError(f"sandbox: {name} is not allowed")
        if event == "open":
            mode, flags = args[1], args[2]
            if (type(mode) is str and any(c in mode for c in "wax+")) or (
                type(flags) is int and flags & wflags):
                path = args[0] if type(args[0]) in (str, bytes, int) else "a path"
                raise PermissionError(f"sandbox: writing {path!r} is not allowed")
    sys.addaudithook(hook)
"""


@dataclass(frozen=True)
class Outcome:
    """What a sandboxed program left: its exit code (None when killed at the time limit),
    the tails of its stdout and stderr, and its result (at most :data:`RESULT_CAP` bytes;
    None when it wrote none or more than the cap)."""

    returncode: int | None
    stdout: str
    stderr: str
    result: bytes | None
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def _interpreter() -> str:
    """The base interpreter (a virtual environment's packages stay out of reach)."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def _bwrap_args(workdir: str, env: dict[str, str]) -> list[str]:
    """The bubblewrap command line before the program: no network, PID, user, IPC and UTS
    namespaces of its own, no capabilities, read-only libraries and interpreter, the
    program's folder read-only at ``/sandbox``, a private ``/tmp``."""
    args = ["bwrap", "--unshare-all", "--unshare-user", "--uid", "65534", "--gid", "65534"]
    args += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    for path in ("/usr/lib", "/usr/lib64", "/usr/lib32", "/lib", "/lib64", "/lib32"):
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    exe = _interpreter()
    for path in (sysconfig.get_config_var("LIBDIR"), sysconfig.get_path("stdlib")):
        if path and os.path.isdir(path) and not path.startswith(("/usr/lib/", "/lib")):
            args += ["--ro-bind", path, path]
    args += ["--ro-bind", exe, exe, "--proc", "/proc", "--dev", "/dev"]
    args += ["--size", str(16 << 20), "--tmpfs", "/tmp"]
    args += ["--ro-bind", workdir, "/sandbox", "--chdir", "/sandbox", "--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return [*args, "--"]


@functools.cache
def _bwrap_works() -> bool:
    """Whether bubblewrap runs the interpreter here (probed once per process)."""
    if shutil.which("bwrap") is None:
        return False
    with tempfile.TemporaryDirectory(prefix="psens-probe-") as tmp:
        cmd = [*_bwrap_args(tmp, {}), _interpreter(), "-c", "pass"]
        try:
            done = subprocess.run(cmd, capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.SubprocessError):
            return False
    return done.returncode == 0


_WARNED: list[bool] = []


def sandbox_mode() -> str:
    """``"bwrap"`` when programs run in the bubblewrap sandbox, ``"guard"`` when only the
    guard confines them (warned once per process: not a security boundary)."""
    if _bwrap_works():
        return "bwrap"
    if not _WARNED:
        _WARNED.append(True)
        warnings.warn(
            "psens sandbox: bubblewrap (bwrap) is not installed or cannot create namespaces "
            "here, so generated code runs with the in-process guard only, which is NOT a "
            "security boundary; install bubblewrap (apt-get install bubblewrap) to confine it",
            stacklevel=3,
        )
    return "guard"


def _write_flags() -> int:
    flags = 0
    for name in ("O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"):
        flags |= getattr(os, name, 0)
    return flags


def _tail(path: str, cap: int = OUTPUT_CAP) -> str:
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - cap))
        return f.read(cap).decode("utf-8", "replace")


def _read_result(path: str) -> bytes | None:
    with open(path, "rb") as f:
        data = f.read(RESULT_CAP + 1)
    return data if 0 < len(data) <= RESULT_CAP else None


def _kill_tagged(marker: bytes) -> None:
    """SIGKILL every process whose environment holds ``marker`` (the sandbox's tag), until
    none is left: what a program started, even in a session of its own."""
    for _ in range(50):
        found = False
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/environ", "rb") as f:
                    hit = marker in f.read()
            except OSError:
                continue
            if hit:
                found = True
                try:
                    os.kill(int(name), signal.SIGKILL)
                except OSError:
                    pass
        if not found:
            return
        time.sleep(0.005)


def run_python(
    program: str,
    args: Sequence[str] = (),
    files: dict[str, str] | None = None,
    *,
    timeout: float,
    memory_mb: int = 1024,
    guard: bool = True,
    max_processes: int = 1,
) -> Outcome:
    """Run ``program`` (Python source) in a sandboxed process and wait at most ``timeout``
    seconds of wall time.

    ``files`` (name → text) are written to the program's working folder (read-only under
    ``bwrap``); the program sees ``_ARGS`` (``args``) and ``_RESULT``, a writable file
    descriptor whose content comes back as :attr:`Outcome.result`. ``guard=False`` and
    ``max_processes`` exist for the tests of the OS sandbox (what holds without the hook).
    """
    mode = sandbox_mode()
    tag = secrets.token_hex(8)
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0"}
    env.update({"PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1", TAG: tag})
    cpu = max(1, int(timeout) + 1)
    with tempfile.TemporaryDirectory(prefix="psens-sandbox-") as tmp:
        work, io = os.path.join(tmp, "work"), os.path.join(tmp, "io")
        os.mkdir(work)
        os.mkdir(io)
        for name, text in (files or {}).items():
            with open(os.path.join(work, name), "w", encoding="utf-8") as f:
                f.write(text)
        out_path, err_path, res_path = (os.path.join(io, n) for n in ("out", "err", "result"))
        res_fd = os.open(res_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        source = (
            _PRELUDE
            + f"_limits({cpu}, {memory_mb << 20}, {RESULT_CAP}, {max_processes})\n"
            + f"_RESULT, _ARGS = {res_fd}, {list(args)!r}\n"
            + (f"_guard({_write_flags()})\n" if guard else "")
            + "del _limits, _guard\n"
            + program
        )
        cmd = [_interpreter(), "-s", "-B", "-c", source]
        if mode == "bwrap":
            cmd = [*_bwrap_args(work, env), *cmd]
        start = time.monotonic()
        try:
            with open(out_path, "wb") as out, open(err_path, "wb") as err:
                proc = subprocess.Popen(
                    cmd,
                    cwd=work,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    pass_fds=(res_fd,),
                    start_new_session=True,  # its own process group, killed as a whole
                )
        except OSError as exc:
            os.close(res_fd)
            return Outcome(-1, "", f"could not start Python: {exc}", None, 0.0)
        os.close(res_fd)
        try:
            code: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
            _kill_tagged(f"{TAG}={tag}".encode())
        seconds = time.monotonic() - start
        return Outcome(code, _tail(out_path), _tail(err_path), _read_result(res_path), seconds)
