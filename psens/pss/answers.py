r"""Answer checking for ProSA's MATH and HumanEval benchmarks.

* **MATH**: the answer is the content of the last ``\boxed{...}`` (or ``\fbox{...}``) of a
  text, read with nested braces (``\boxed{\frac{1}{2}}`` is ``\frac{1}{2}``); a response is
  correct when its boxed answer equals the gold one (the last boxed answer of the reference
  solution) after removing whitespace — exact match, no algebraic equivalence
  (:func:`psens.datasets.boxed_answer`, :func:`math_correct`).
* **HumanEval**: pass@1 of a completion is whether the benchmark's tests pass on it
  (:func:`run_humaneval`, :func:`pass_at_1`). The program (the prompt plus the completion,
  or the completion alone when it defines the function itself; a fenced code block is
  taken out of a chat reply) runs in a **separate Python process**, never in the caller's:
  a fresh temporary folder as its working directory (removed afterwards), an environment
  without proxies or ``PYTHONPATH``, isolated mode (``-I``, no site folders on the path of
  the user), limits on CPU time, memory and file size, and an audit hook that refuses
  sockets, new processes, ``ctypes`` and every file write (opening for writing, removing,
  renaming, creating folders). A completion that runs past ``timeout`` seconds is killed
  with its process group and recorded as ``"timeout"``; one that tries to write a file or
  open a socket fails with the refusal in ``detail``. Each outcome is a recorded
  :class:`ExecResult`, never an exception.

ProSA checks MATH answers with an LLM judge (its app. B) and does not say how HumanEval is
checked; exact match of the boxed answer and running the tests are psens's deterministic
stand-ins.

References
----------
.. [1] Zhuo et al., ProSA, Findings of EMNLP 2024; the full reference is in :mod:`psens.pss`.
.. [2] Hendrycks, D., Burns, C., Kadavath, S., Arora, A., Basart, S., Tang, E., Song, D., and
   Steinhardt, J. "Measuring Mathematical Problem Solving With the MATH Dataset." NeurIPS
   Datasets and Benchmarks, 2021.
.. [3] Chen, M. et al. "Evaluating Large Language Models Trained on Code." arXiv:2107.03374,
   2021.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from psens._validation import check_positive_int, fail
from psens.datasets import boxed_answer

__all__ = [
    "ExecResult",
    "extract_code",
    "humaneval_program",
    "math_correct",
    "pass_at_1",
    "run_humaneval",
]


def _norm(answer: str) -> str:
    return re.sub(r"\s+", "", answer)


def math_correct(response: str | None, gold: str) -> float:
    """1.0 when the last boxed answer of ``response`` equals ``gold`` (whitespace
    removed), 0.0 when it differs or there is none, NaN for a missing response (a failed
    call). ``gold`` is the reference answer itself (the loader takes it from the
    solution's last box)."""
    if response is None:
        return float("nan")
    got = boxed_answer(response)
    return float(got is not None and _norm(got) == _norm(gold))


# --------------------------------------------------------------------------------------------
# HumanEval
# --------------------------------------------------------------------------------------------

_FENCE = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def extract_code(text: str) -> str:
    """The code of a reply: the first fenced block's content when there is one, else the
    text itself."""
    m = _FENCE.search(text or "")
    return m.group(1) if m else (text or "")


def humaneval_program(prompt: str, completion: str, test: str, entry_point: str) -> str:
    """The program that checks a completion: the prompt and the completion (or, when the
    completion defines ``entry_point`` itself, the prompt's import lines and the
    completion), then the benchmark's ``test`` code and ``check(entry_point)``."""
    code = extract_code(completion)
    if re.search(rf"^\s*def\s+{re.escape(entry_point)}\s*\(", code, re.MULTILINE):
        imports = [ln for ln in prompt.splitlines() if re.match(r"\s*(import|from)\s", ln)]
        body = "\n".join(imports) + "\n" + code
    else:
        body = prompt + code
    return f"{body}\n\n{test}\n\ncheck({entry_point})\n"


@dataclass(frozen=True)
class ExecResult:
    """The outcome of running one HumanEval program.

    ``status`` is ``"passed"``, ``"failed"`` (a test or the code raised), ``"timeout"``
    (killed after the time limit) or ``"error"`` (the process could not run); ``detail``
    holds the last lines of its error output.
    """

    passed: bool
    status: str
    detail: str = ""


#: Run in the child before the program: resource limits and the audit hook (see the module
#: docstring). ``{nonce}`` is printed only after ``check`` returned.
_GUARD = r"""
import resource, sys
def _limit(kind, value):
    try:
        resource.setrlimit(kind, (value, value))
    except (ValueError, OSError):
        pass
_limit(resource.RLIMIT_CPU, {cpu})
_limit(resource.RLIMIT_AS, {memory})
_limit(resource.RLIMIT_FSIZE, 1 << 20)
_limit(resource.RLIMIT_CORE, 0)
_src = open(sys.argv[1], encoding="utf-8").read()
_code = compile(_src, "candidate.py", "exec")
_BLOCKED = ("socket.", "subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
            "os.fork", "os.forkpty", "pty.", "ctypes.", "os.remove", "os.rename", "os.rmdir",
            "os.mkdir", "os.symlink", "os.link", "os.truncate", "os.chmod", "os.chown",
            "os.utime", "shutil.", "os.putenv", "os.unsetenv", "os.kill", "os.killpg")
_WRITE = {wflags}
def _hook(event, args):
    if event.startswith(_BLOCKED):
        raise PermissionError(f"sandbox: {{event}} is not allowed")
    if event == "open":
        mode, flags = args[1], args[2]
        if (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
            isinstance(flags, int) and flags & _WRITE):
            raise PermissionError(f"sandbox: writing {{args[0]!r}} is not allowed")
sys.addaudithook(_hook)
del _src
exec(_code, {{"__name__": "__main__"}})
print("{nonce}")
"""


def _write_flags() -> int:
    flags = 0
    for name in ("O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"):
        flags |= getattr(os, name, 0)
    return flags


def run_humaneval(
    completion: str,
    prompt: str,
    test: str,
    entry_point: str,
    *,
    timeout: float = 10.0,
    memory_mb: int = 1024,
) -> ExecResult:
    """Run the HumanEval tests on one completion in a sandboxed subprocess.

    Parameters
    ----------
    completion
        The model's reply (a code block is taken out of it, see :func:`extract_code`).
    prompt, test, entry_point
        The item's function header and docstring, its ``check`` function and the
        function's name (``Item.question``, ``metadata["test"]``,
        ``metadata["entry_point"]`` of :func:`psens.datasets.load` ``("humaneval")``).
    timeout
        Seconds of wall time before the process group is killed (``"timeout"``).
    memory_mb
        Address-space limit of the child.

    Returns
    -------
    ExecResult
    """
    where = "psens.pss.run_humaneval"
    if not isinstance(timeout, int | float) or not timeout > 0:
        fail(where, f"timeout={timeout!r}", "Pass a positive number of seconds")
    check_positive_int(memory_mb, where, "memory_mb")
    if not entry_point.isidentifier():
        fail(where, f"entry_point={entry_point!r} is not a function name", "Pass the name")
    nonce = secrets.token_hex(16)
    guard = _GUARD.format(
        cpu=int(timeout) + 1, memory=memory_mb << 20, wflags=_write_flags(), nonce=nonce
    )
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # no proxy variables, no PYTHONPATH
    with tempfile.TemporaryDirectory(prefix="psens-humaneval-") as tmp:
        path = os.path.join(tmp, "candidate.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(humaneval_program(prompt, completion, test, entry_point))
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-B", "-c", guard, path],
                cwd=tmp,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group, killed as a whole
            )
        except OSError as exc:
            return ExecResult(False, "error", f"could not start Python: {exc}")
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            proc.communicate()
            return ExecResult(False, "timeout", f"killed after {timeout:g} s")
    tail = "\n".join(err.decode("utf-8", "replace").strip().splitlines()[-3:])
    if proc.returncode == 0 and nonce in out.decode("utf-8", "replace"):
        return ExecResult(True, "passed", "")
    if proc.returncode is not None and proc.returncode < 0:
        sig = signal.Signals(-proc.returncode).name
        return ExecResult(False, "failed", f"killed by {sig}" + (f": {tail}" if tail else ""))
    return ExecResult(False, "failed", tail or f"exit code {proc.returncode}")


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def pass_at_1(results: Sequence[ExecResult]) -> float:
    """pass@1 of one completion per item: the share of items whose tests passed (Chen et
    al. 2021 with n = k = 1); NaN for no items."""
    if not results:
        return float("nan")
    return sum(r.passed for r in results) / len(results)
