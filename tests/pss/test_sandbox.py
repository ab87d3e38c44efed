"""The HumanEval sandbox: unforgeable verdicts, nothing escapes, the timeout holds.

Every attack runs as a completion (or, for what the OS sandbox must hold on its own, as a
program with the audit hook off). Tests run in both modes where the property must hold in
both (``bwrap`` and the guard-only fallback); the escape tests of the OS sandbox skip with
a reason where bubblewrap cannot run here.
"""

from __future__ import annotations

import os
import resource
import secrets
import select
import socket
import sys
import time
import warnings

import pytest

from psens.pss import sandbox
from psens.pss.answers import ExecResult, pass_at_1, run_humaneval

pytestmark = pytest.mark.sandbox

BWRAP = sandbox._bwrap_works()
needs_bwrap = pytest.mark.skipif(
    not BWRAP, reason="bubblewrap is not installed or cannot create namespaces here"
)
TIMEOUT = 1.5

# HumanEval-shaped items, made up for these tests (prompt, canonical solution, test, name)
ADD = (
    'from typing import List\n\n\ndef add(xs: List[int]) -> int:\n    """Sum."""\n',
    "    return sum(xs)\n",
    "def check(candidate):\n    assert candidate([1, 2]) == 3\n    assert candidate([]) == 0\n",
    "add",
)
MEAN = (
    'from typing import List\n\n\ndef mean(xs: List[float]) -> float:\n    """Mean."""\n',
    "    return sum(xs) / len(xs)\n",
    "def check(candidate):\n"
    "    assert abs(candidate([1.0, 2.0]) - 1.5) < 1e-9\n"
    "    assert abs(candidate([0.1, 0.2, 0.3]) - 0.2) < 1e-9\n",
    "mean",
)
WORDS = (
    "from typing import List, Tuple\n\n\n"
    'def words(s: str) -> List[Tuple[str, int]]:\n    """Words and their lengths."""\n',
    "    return [(w, len(w)) for w in s.split()]\n",
    "import random\n\n\ndef check(candidate):\n"
    "    for _ in range(20):\n"
    "        s = ' '.join(random.choice(['a', 'bb', 'ccc']) for _ in range(random.randint(0, 5)))\n"
    "        assert candidate(s) == [(w, len(w)) for w in s.split()]\n",
    "words",
)


@pytest.fixture(params=["bwrap", "guard"])
def mode(request, monkeypatch):
    """Run the test under bubblewrap, then with the guard only."""
    if request.param == "bwrap":
        if not BWRAP:
            pytest.skip("bubblewrap is not installed or cannot create namespaces here")
    else:
        monkeypatch.setattr(sandbox, "_bwrap_works", lambda: False)
        monkeypatch.setattr(sandbox, "_WARNED", [True])  # its own test checks the warning
    monkeypatch.setattr("psens.pss.answers._REFERENCES", {})
    assert sandbox.sandbox_mode() == request.param
    return request.param


def _run(completion: str, item=ADD, timeout: float = TIMEOUT) -> ExecResult:
    prompt, canonical, test, name = item
    return run_humaneval(completion, prompt, test, name, canonical=canonical, timeout=timeout)


def _body(code: str) -> str:
    """Indent ``code`` as a function body."""
    return "".join(f"    {line}\n" for line in code.strip("\n").splitlines())


def _survivors(marker: str) -> list[int]:
    """PIDs of the processes whose command line holds ``marker``."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(name))
            except OSError:
                pass
    return found


# ------------------------------------------------------------------ correct completions


def test_correct_completions_pass_and_wrong_ones_fail(mode):
    for item in (ADD, MEAN, WORDS):
        assert _run(item[1], item) == ExecResult(True, "passed", ""), item[3]
    chat = "Sure:\n```python\ndef mean(xs):\n    return sum(xs) / len(xs)\n```\n"
    assert _run(chat, MEAN).passed
    # another correct body with other float rounding: within the tolerance
    assert _run("    return sum(x / len(xs) for x in xs)\n", MEAN).passed
    wrong = _run("    return [(w, 1) for w in s.split()]\n", WORDS)
    assert not wrong.passed and "AssertionError" in wrong.detail
    assert pass_at_1([_run(ADD[1]), wrong]) == 0.5


def test_a_canonical_solution_is_required():
    with pytest.raises(ValueError, match="canonical solution"):
        run_humaneval(ADD[1], ADD[0], ADD[2], "add")


def test_the_reference_runs_once_per_item(mode, monkeypatch):
    calls = []
    real = sandbox.run_python
    monkeypatch.setattr(
        "psens.pss.answers.run_python", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    assert _run(ADD[1]).passed and _run("    return 0 + sum(xs)\n").passed
    assert len(calls) == 3  # the reference once, each completion once


# ------------------------------------------------------------------ forged verdicts


ARGV_FRAMES = """
import os, sys
texts = list(sys.orig_argv)
texts += open('/proc/self/cmdline', 'rb').read().decode('utf-8', 'replace').split('\\0')
frame = sys._getframe()
while frame is not None:
    texts += [c for c in frame.f_code.co_consts if isinstance(c, str)]
    frame = frame.f_back
print('\\n'.join(texts), flush=True)
os._exit(0)
"""


@pytest.mark.parametrize(
    "attack",
    [
        pytest.param(ARGV_FRAMES, id="argv-cmdline-frame-constants-then-os_exit"),
        pytest.param("import sys\nprint('passed')\nsys.exit(0)", id="sys-exit-early"),
        pytest.param("import os\nos._exit(0)", id="os-exit-early"),
        pytest.param(
            "class A:\n    def __eq__(self, other):\n        return True\nreturn A()",
            id="always-equal-object",
        ),
        pytest.param(
            "class I(int):\n    def __eq__(self, other):\n        return True\nreturn I(0)",
            id="int-subclass",
        ),
        pytest.param(
            # a made-up record, written to every descriptor, then an early exit
            "import os, json\n"
            "rec = json.dumps({'calls': [[[[[1, 2]], {}], ['i', '0x0']]]}).encode()\n"
            "for fd in range(3, 64):\n"
            "    try:\n"
            "        os.write(fd, rec)\n"
            "    except OSError:\n"
            "        pass\n"
            "os._exit(0)",
            id="forged-result-record",
        ),
        pytest.param("return 3 if xs == [1, 2] else 1", id="wrong-values"),
    ],
)
def test_a_pass_cannot_be_faked(mode, attack):
    got = _run(_body(attack))
    assert not got.passed and got.status == "failed", got


def test_the_verdict_does_not_depend_on_the_guard(mode, monkeypatch):
    """With the audit hook off, exiting early after printing still is no pass."""
    real = sandbox.run_python
    monkeypatch.setattr("psens.pss.answers.run_python", lambda *a, **k: real(*a, **k, guard=False))
    assert _run(ADD[1]).passed
    assert not _run(_body(ARGV_FRAMES)).passed
    assert not _run(_body("import sys\nsys.exit(0)")).passed


# ------------------------------------------------------------------ nothing escapes


def _attacks(target: str) -> dict[str, str]:
    """Completion bodies that try to create ``target`` (a path outside the sandbox)."""
    sh = f"echo owned > {target}"
    fork_exec = (
        "import os, _posixsubprocess\n"
        "r, w = os.pipe()\n"
        f"head = ([b'/bin/sh', b'-c', {sh.encode()!r}], [b'/bin/sh'], True, (w,), None, None,\n"
        "        -1, -1, -1, -1, -1, -1, r, w, True, False, -1, None, None, None, -1, None)\n"
        "try:\n"
        "    _posixsubprocess.fork_exec(*head, False)\n"  # 3.11.7+: allow_vfork
        "except TypeError:\n"
        "    _posixsubprocess.fork_exec(*head)\n"
        "import time\ntime.sleep(0.3)\n"
    )
    return {
        "main-blocked-reset": f"import __main__\n__main__._BLOCKED = ()\nopen({target!r}, 'w')",
        "write-outside": f"open({target!r}, 'w').write('owned')",
        "os-open-outside": f"import os\nos.open({target!r}, os.O_WRONLY | os.O_CREAT)",
        "bin-sh-subprocess": f"import subprocess\nsubprocess.run(['/bin/sh', '-c', {sh!r}])",
        "bin-sh-fork_exec": fork_exec,
        "sqlite3-outside": (
            f"import sqlite3\nsqlite3.connect({target!r}).execute('create table t(x)')"
        ),
    }


ESCAPES = sorted(_attacks("/x"))


@pytest.mark.parametrize("attack", ESCAPES)
def test_completions_cannot_write_outside(mode, attack, tmp_path):
    target = str(tmp_path / "owned")
    got = _run(_body(_attacks(target)[attack] + "\nreturn sum(xs)"))
    assert not os.path.exists(target), attack
    if mode == "guard":
        assert not got.passed and "sandbox:" in got.detail, got


def test_the_fork_exec_attack_works_without_a_sandbox(tmp_path):
    """The attack above is real: unconfined, it runs /bin/sh and creates the file."""
    import subprocess

    target = str(tmp_path / "owned")
    code = _attacks(target)["bin-sh-fork_exec"]
    subprocess.run([sys.executable, "-c", code], check=True, timeout=10)
    assert os.path.exists(target)


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.setblocking(False)
    yield server
    server.close()


def _connected(server: socket.socket) -> bool:
    return bool(select.select([server], [], [], 0.2)[0])


def test_no_socket_reaches_the_host(mode, listener):
    port = listener.getsockname()[1]
    code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)"
    got = _run(_body(code + "\nreturn sum(xs)"))
    assert not got.passed and not _connected(listener), got
    # and the guard's reset does not help either
    reset = "import __main__\n__main__._BLOCKED = ()\n" + code
    assert not _run(_body(reset + "\nreturn sum(xs)")).passed and not _connected(listener)


@needs_bwrap
@pytest.mark.parametrize("attack", ESCAPES)
def test_bwrap_alone_stops_escapes_with_the_hook_off(attack, tmp_path):
    """The OS sandbox holds without the audit hook (what a bypassed guard leaves)."""
    target = str(tmp_path / "owned")
    code = _attacks(target)[attack]
    sandbox.run_python(code, timeout=TIMEOUT, guard=False, max_processes=64)
    assert not os.path.exists(target), attack


@needs_bwrap
def test_bwrap_alone_has_no_network_and_no_shell(listener, tmp_path):
    port = listener.getsockname()[1]
    code = (
        "import os, socket\n"
        "print(os.path.exists('/bin/sh'), os.path.exists('/usr/bin/sh'), os.getuid())\n"
        f"socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
    )
    out = sandbox.run_python(code, timeout=TIMEOUT, guard=False)
    assert out.returncode == 1 and "ConnectionRefusedError" in out.stderr, out
    assert out.stdout.split() == ["False", "False", "65534"]
    assert not _connected(listener)


# ------------------------------------------------------------------ the timeout holds


def _grandchild(marker: str, parent_waits: bool) -> str:
    """A program whose grandchild leaves the session, keeps stdout open and sleeps."""
    return (
        f"# {marker}\n"
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        print('grandchild', flush=True)\n"
        "        time.sleep(60)\n"
        "    os._exit(0)\n"
        "time.sleep(0.3)\n" + ("time.sleep(60)\n" if parent_waits else "")
    )


@pytest.mark.parametrize("parent_waits", [False, True], ids=["parent-exits", "parent-hangs"])
def test_a_detached_grandchild_is_killed_in_time(mode, parent_waits):
    marker = "psens-test-" + secrets.token_hex(6)
    start = time.monotonic()
    out = sandbox.run_python(
        _grandchild(marker, parent_waits), timeout=TIMEOUT, guard=False, max_processes=64
    )
    assert time.monotonic() - start < TIMEOUT + 1
    assert out.timed_out == parent_waits and "grandchild" in out.stdout
    time.sleep(0.1)
    assert _survivors(marker) == []


def test_a_completion_that_forks_or_sleeps_ends_in_time(mode):
    marker = "psens-test-" + secrets.token_hex(6)
    for code, status in (
        (_grandchild(marker, True) + "return sum(xs)", "failed"),  # the guard refuses fork
        ("import time\ntime.sleep(10 ** 6)", "timeout"),
        ("while True:\n    pass", "timeout"),
    ):
        start = time.monotonic()
        got = _run(_body(code))
        assert time.monotonic() - start < TIMEOUT + 1, code
        assert not got.passed and got.status == status, got
    assert _survivors(marker) == []


def test_sleep_infinity_started_detached_is_killed(mode):
    """``sleep`` started in its own session (where a sleep binary is in reach)."""
    seconds = str(1000000 + secrets.randbelow(10**6))
    code = (
        "import subprocess\n"
        "try:\n"
        f"    subprocess.Popen(['sleep', '{seconds}'], start_new_session=True)\n"
        "except OSError as exc:\n"
        "    print(exc)\n"
    )
    start = time.monotonic()
    sandbox.run_python(code, timeout=TIMEOUT, guard=False, max_processes=64)
    assert time.monotonic() - start < TIMEOUT + 1
    time.sleep(0.1)
    assert _survivors(f"sleep\0{seconds}") == []


# ------------------------------------------------------------------ bounded output


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_400_mb_of_output_is_cut_off(mode, stream):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code = f"import sys\nchunk = 'x' * 65536\nfor _ in range(6400):\n    sys.{stream}.write(chunk)"
    start = time.monotonic()
    got = _run(_body(code + "\nreturn sum(xs)"))
    assert time.monotonic() - start < TIMEOUT + 1
    assert not got.passed and len(got.detail) < 4096, got
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before  # KiB
    assert grew < 50 * 1024


def test_the_guard_only_mode_warns_once(monkeypatch):
    monkeypatch.setattr(sandbox, "_bwrap_works", lambda: False)
    monkeypatch.setattr(sandbox, "_WARNED", [])
    with pytest.warns(UserWarning, match="NOT a security boundary"):
        assert sandbox.sandbox_mode() == "guard"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert sandbox.sandbox_mode() == "guard"


def test_runs_execute_code_only_with_the_opt_in(monkeypatch):
    """The runner scores a HumanEval item's generated text only with
    ``allow_code_execution``; without it nothing runs and ``correct`` stays NaN."""
    from types import SimpleNamespace

    import psens.pss.answers
    from psens.datasets import Item
    from psens.runner import _correct

    prompt, canonical, test, name = ADD
    item = Item(
        "h0",
        prompt,
        answer=canonical,
        metadata={"test": test, "entry_point": name},
        task_type="code",
    )
    good = SimpleNamespace(correct=None, text="    return sum(xs)\n")
    bad = SimpleNamespace(correct=None, text="    return 0\n")
    on, off = (
        SimpleNamespace(allow_code_execution=True),
        SimpleNamespace(allow_code_execution=False),
    )
    assert (_correct(on, item, good), _correct(on, item, bad)) == (1.0, 0.0)
    assert _correct(on, item, SimpleNamespace(correct=True, text="")) == 1.0  # an option choice

    def boom(*a, **k):
        raise AssertionError("code was run")

    monkeypatch.setattr(psens.pss.answers, "run_humaneval", boom)
    assert str(_correct(off, item, good)) == "nan"
