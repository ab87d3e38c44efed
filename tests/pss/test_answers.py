"""MATH and HumanEval: loaders on local files, boxed-answer matching, the sandboxed tests."""

from __future__ import annotations

import json
import os
import time

import pytest

from psens import datasets
from psens.pss.answers import (
    ExecResult,
    boxed_answer,
    extract_code,
    humaneval_program,
    math_correct,
    pass_at_1,
    run_humaneval,
)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        (r"The answer is $\boxed{5}$.", "5"),
        (r"$\boxed{\frac{1}{2}}$", r"\frac{1}{2}"),
        (r"$\boxed{\sqrt{\frac{a}{b^{2}}}}$ done", r"\sqrt{\frac{a}{b^{2}}}"),
        (r"first \boxed{1} then \boxed{ 2 }", "2"),
        (r"\fbox{x+1}", "x+1"),
        (r"\boxed {\{1, 2\}}", r"\{1, 2\}"),
        (r"\boxed{\frac{1}{2}", None),  # unclosed
        ("no box here", None),
    ],
)
def test_boxed_answer_reads_nested_braces(text, want):
    assert boxed_answer(text) == want


def test_math_correct_is_exact_match_of_the_boxed_answer():
    assert math_correct(r"so \boxed{\frac{1}{2}}", r"\frac{1}{2}") == 1.0
    assert math_correct(r"so \boxed{\frac {1}{2} }", r"\frac{1}{2}") == 1.0  # spaces only
    assert math_correct(r"so \boxed{0.5}", r"\frac{1}{2}") == 0.0  # no equivalence
    assert math_correct("the answer is 5", "5") == 0.0  # not boxed
    assert str(math_correct(None, "5")) == "nan"


def test_math_loader_on_a_local_file(tmp_path):
    path = tmp_path / "math.jsonl"
    rows = [
        {
            "problem": "What is $1+1$?",
            "level": "Level 1",
            "type": "Algebra",
            "solution": r"We add: $1+1=\boxed{2}$.",
        },
        {
            "problem": "Simplify $\\frac{2}{4}$.",
            "level": "Level 2",
            "type": "Prealgebra",
            "solution": r"Divide: $\boxed{\frac{1}{2}}$.",
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    items = datasets.load("math", path=path)
    assert [it.answer for it in items] == ["2", r"\frac{1}{2}"]
    assert items[0].task_type == "math" and items[1].metadata["type"] == "Prealgebra"
    assert math_correct(r"I get \boxed{\frac{1}{2}}", items[1].answer) == 1.0
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"problem": "x", "solution": "no box"}) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl.*no \\boxed"):
        datasets.load("math", path=bad)


def test_math_without_a_local_file_names_the_hub(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match="EleutherAI/hendrycks_math"):
        datasets.load("math:algebra")


ADD = {
    "task_id": "HumanEval/0",
    "prompt": 'from typing import List\n\n\ndef add(xs: List[int]) -> int:\n    """Sum."""\n',
    "canonical_solution": "    return sum(xs)\n",
    "test": (
        "def check(candidate):\n    assert candidate([1, 2]) == 3\n    assert candidate([]) == 0\n"
    ),
    "entry_point": "add",
}


@pytest.fixture
def add_item(tmp_path):
    path = tmp_path / "he.jsonl"
    path.write_text(json.dumps(ADD) + "\n")
    (item,) = datasets.load("humaneval", path=path)
    return item


def _run(item, completion, **kw):
    return run_humaneval(
        completion,
        item.question,
        item.metadata["test"],
        item.metadata["entry_point"],
        canonical=item.answer,
        **kw,
    )


def test_humaneval_loader_and_pass_at_1(add_item):
    assert add_item.id == "HumanEval/0" and add_item.task_type == "code"
    good = _run(add_item, add_item.answer)
    assert good == ExecResult(True, "passed", "")
    wrong = _run(add_item, "    return 0\n")
    assert not wrong.passed and wrong.status == "failed" and "AssertionError" in wrong.detail
    # a chat reply with the whole function in a code block
    chat = "Sure:\n```python\ndef add(xs: List[int]) -> int:\n    return sum(xs)\n```\n"
    assert _run(add_item, chat).passed
    assert pass_at_1([good, wrong]) == 0.5


def test_a_hanging_completion_is_killed_and_recorded(add_item):
    start = time.perf_counter()
    got = _run(add_item, "    while True:\n        pass\n", timeout=2)
    assert got == ExecResult(False, "timeout", "killed after 2 s")
    assert time.perf_counter() - start < 10


def test_a_completion_that_writes_files_is_refused(add_item, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "owned.txt"
    for code in (
        f"    open({str(target)!r}, 'w').write('x')\n    return sum(xs)\n",
        "    open('here.txt', 'a').write('x')\n    return sum(xs)\n",
        f"    import os\n    os.remove({str(tmp_path / 'he.jsonl')!r})\n    return sum(xs)\n",
    ):
        got = _run(add_item, code)
        assert not got.passed and got.status == "failed"
        assert "sandbox:" in got.detail and "not allowed" in got.detail
    assert not target.exists() and not (tmp_path / "here.txt").exists()
    assert (tmp_path / "he.jsonl").exists()


def test_sockets_processes_and_the_callers_process_are_out_of_reach(add_item):
    sock = "    import socket\n    socket.create_connection(('127.0.0.1', 9))\n    return sum(xs)\n"
    got = _run(add_item, sock)
    assert not got.passed and "socket" in got.detail
    proc = "    import subprocess\n    subprocess.run(['true'])\n    return sum(xs)\n"
    got = _run(add_item, proc)
    assert "sandbox: _posixsubprocess is not allowed" in got.detail  # subprocess cannot load
    # the program runs in another process: exiting early is not a pass
    assert not _run(add_item, "    import os\n    os._exit(0)\n").passed
    me = os.getpid()
    leak = f"    import os\n    assert os.getpid() != {me}\n    return sum(xs)\n"
    assert _run(add_item, leak).passed


def test_the_program_and_code_extraction():
    assert extract_code("x\n```py\nprint(1)\n```") == "print(1)\n"
    assert extract_code("plain") == "plain"
    prog = humaneval_program(ADD["prompt"], "    return 1\n", ADD["test"], "add")
    assert prog.startswith(ADD["prompt"] + "    return 1\n") and prog.endswith("check(add)\n")
    with pytest.raises(ValueError, match="not a function name"):
        run_humaneval("", "", "", "add; import os")
