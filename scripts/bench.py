"""`make bench`: psens against baselines run in the same process, reported as ratios.

Machines are noisy, so every figure is a ratio of two timings taken side by side (best of
several repeats); absolute times are printed for context only. Results also go to
``build/bench.json``. Other benchmark modules in this folder (``bench_*.py`` exposing
``bench() -> list[dict]``) are run too.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from psens.interactions import and_or, mobius_and  # noqa: E402
from psens.interactions.exact import lp_matrices  # noqa: E402


def best_time(fn, repeats: int = 5) -> float:
    """Best wall time of ``repeats`` calls (after one warm-up call)."""
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def result(name, psens_s, base_s, target, *, higher_is_better=True, **extra) -> dict:
    ratio = base_s / psens_s
    ok = ratio >= target if higher_is_better else ratio <= target
    return {
        "name": name,
        "psens_seconds": psens_s,
        "baseline_seconds": base_s,
        "ratio": ratio,
        "target": target,
        "ok": bool(ok),
        **extra,
    }


def bench_mobius_batch() -> dict:
    n, batch = 12, 256
    rng = np.random.default_rng(0)
    v = rng.normal(size=(batch, 1 << n))
    dense = lp_matrices(n)[0].toarray()  # the Möbius matrix, built beforehand
    psens_s = best_time(lambda: mobius_and(v))
    base_s = best_time(lambda: v @ dense.T, repeats=3)
    np.testing.assert_allclose(mobius_and(v), v @ dense.T, atol=1e-8)
    return result("mobius_and 256 games n=12 vs dense matmul", psens_s, base_s, 15.0)


def bench_mobius_large() -> dict:
    n = 20
    v = np.random.default_rng(1).normal(size=1 << n)
    work = v.copy()
    half = 1 << (n - 1)

    def streaming():
        for _ in range(n):
            np.subtract(work[half:], work[:half], out=work[half:])

    out = np.empty_like(v)
    mobius_and(v, out=out)  # warm-up (numba)
    streaming()
    ours, theirs = [], []
    for _ in range(9):  # interleaved, so machine noise hits both alike
        t = time.perf_counter()
        mobius_and(v, out=out)
        ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        streaming()
        theirs.append(time.perf_counter() - t)
    # target: psens time <= 1.5 x the streaming passes, i.e. ratio base/psens >= 1/1.5
    return result("mobius_and one game n=20 vs n streaming passes", min(ours), min(theirs), 1 / 1.5)


def bench_sgd_step() -> dict:
    n, batch = 12, 64
    rng = np.random.default_rng(2)
    v = rng.normal(size=(batch, 1 << n))
    M, L = (m.toarray() for m in lp_matrices(n))
    gamma, buf = np.zeros_like(v), np.zeros_like(v)

    def dense_steps(k=2):
        nonlocal gamma, buf
        for _ in range(k):
            ga = np.sign((0.5 * v + gamma) @ M.T) @ M
            go = np.sign((0.5 * v - gamma) @ L.T) @ L
            buf = 0.9 * buf + (ga - go)
            gamma = gamma - 1e-5 * buf

    steps = 200
    psens_s = best_time(lambda: and_or(v, "sgd", steps=steps), repeats=3) / steps
    base_s = best_time(dense_steps, repeats=2) / 2
    return result("and_or sgd per step, 64 games n=12 vs dense", psens_s, base_s, 10.0)


def bench_exact() -> dict:
    """Per game: and_or(exact) on a batch of 16 random games vs linprog on each game.

    Random Gaussian games are the hard case (no sparse structure). Both sides are timed as
    the best of several repeats, interleaved, so machine noise hits both alike.
    """
    from psens.interactions import l1_objective, mobius_or
    from psens.interactions.exact import solve_gamma_linprog

    n, games, base_games = 8, 16, 4
    rng = np.random.default_rng(3)
    v = rng.normal(size=(games, 1 << n))
    res = and_or(v, "exact")  # warm-up (HiGHS instance, numba)
    ours, theirs = [], []
    gammas = []
    for _ in range(3):
        t = time.perf_counter()
        res = and_or(v, "exact")
        ours.append((time.perf_counter() - t) / games)
        t = time.perf_counter()
        gammas = [solve_gamma_linprog(row, n) for row in v[:base_games]]
        theirs.append((time.perf_counter() - t) / base_games)
    opt = np.array(
        [
            l1_objective(mobius_and(0.5 * row + g), mobius_or(0.5 * row - g))
            for row, g in zip(v[:base_games], gammas, strict=True)
        ]
    )
    rel = float(np.max(np.abs(res.loss[:base_games] - opt) / np.abs(opt)))
    r = result("and_or exact n=8 vs linprog(highs), per game", min(ours), min(theirs), 10.0)
    r["max_rel_gap_to_lp"] = rel
    r["ok"] = r["ok"] and rel <= 1e-5
    return r


def bench_canonical() -> dict:
    """Per game: and_or(canonical) vs and_or(exact) on the same 16 random games, n = 8.

    The canonical split solves the same LP and then walks the optimal face to its least-norm
    point; target: at most twice the time of 'exact' (ratio exact/canonical >= 0.5). Both are
    timed as the best of several interleaved repeats. One n = 10 game is timed for context.
    """
    n, games = 8, 16
    rng = np.random.default_rng(3)
    v = rng.normal(size=(games, 1 << n))
    and_or(v[:2], "canonical")  # warm-up (HiGHS instances, numba)
    and_or(v[:2], "exact")
    ours, theirs = [], []
    for _ in range(3):
        t = time.perf_counter()
        canon = and_or(v, "canonical")
        ours.append((time.perf_counter() - t) / games)
        t = time.perf_counter()
        vertex = and_or(v, "exact")
        theirs.append((time.perf_counter() - t) / games)
    rel = float(np.max(np.abs(canon.loss - vertex.loss) / np.abs(vertex.loss)))
    r = result("and_or canonical n=8 vs exact, per game", min(ours), min(theirs), 0.5)
    r["max_rel_gap_to_lp"] = rel
    r["ok"] = r["ok"] and rel <= 1e-9
    big = np.random.default_rng(4).normal(size=(1, 1 << 10))
    t = time.perf_counter()
    and_or(big, "canonical")
    r["n10_seconds_per_game"] = time.perf_counter() - t
    return r


def bench_cloze(model: str = "smollm2-135m-instruct", n: int = 6, repeats: int = 3) -> dict:
    """A cloze scoring of 4 options vs a letter scoring of the same masks, one process.

    SmolLM2-135M-Instruct (offline package, float32, CPU), the first ARC-Easy validation
    item with 4 options and at least ``n`` words in its question; the same ``2**n`` masks
    over the same ``n`` question words: ``Scorer.choice_logprobs`` under ``ips1-cloze``
    (each masked prompt once, then the options' tokens as branches of the prefix tree) +
    the cloze value, against ``Scorer.value`` under ``ips1`` (the letter prompt, which also
    lists the options). Target: the cloze scoring costs at most 1.6x the letter one (ratio
    letter / cloze >= 1 / 1.6). Best of ``repeats`` interleaved repeats.
    """
    from psens import datasets, models, prompts
    from psens.cloze import cloze_value

    scorer = models.load(model, progress=False, n_max=n)
    item = next(
        it
        for it in datasets.load("arc-easy", split="validation")
        if len(it.options) == 4 and len(prompts.variables(it, n_max=n, options=False)) == n
    )
    words = prompts.variables(item, n_max=n, options=False)
    masks = np.arange(1 << n)
    enc = scorer.encode(item, "ips1-cloze", variables=())
    tokens = [len(enc.continuations[lab]) for lab in item.labels]
    nbytes = [len(text.encode()) for _, text in item.options]
    answer = list(item.labels).index(item.answer)

    def cloze():
        ll = scorer.choice_logprobs(item, "ips1-cloze", masks, variables=words)
        return cloze_value(ll, tokens, nbytes, answer, "char")

    def letter():
        return scorer.value(item, "ips1", masks, variables=words)

    cloze(), letter()  # warm-up
    ours, theirs = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        cloze()
        ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        letter()
        theirs.append(time.perf_counter() - t)
    return result(
        f"cloze 4 options vs letter, {1 << n} masks ({model})",
        min(ours),
        min(theirs),
        1 / 1.6,
        max_option_tokens=max(tokens),
        prompt_tokens_cloze=len(enc.ids),
        prompt_tokens_letter=len(scorer.encode(item, "ips1", variables=()).ids),
    )


def cpu_model() -> str:
    """The CPU model name: :func:`psens.models.hardware.cpu_name`, the one lookup that
    ``psens plan`` and every benchmark and measuring script print."""
    from psens.models.hardware import cpu_name

    return cpu_name()


def machine() -> dict:
    info = {"python": platform.python_version(), "cores": os.cpu_count(), "cpu": cpu_model()}
    try:
        info["mem_gib"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30)
    except (ValueError, OSError):
        pass
    return info


def other_benches() -> list[dict]:
    rows = []
    for path in sorted(Path(__file__).parent.glob("bench_*.py")):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(mod)
            for row in mod.bench():
                if row.get("target") is not None:  # rows without a target are context
                    row.setdefault("ok", bool(row["ratio"] >= row["target"]))
                rows.append(row)
        except Exception as exc:  # report, keep going: one broken bench must not hide others
            rows.append({"name": path.stem, "error": f"{type(exc).__name__}: {exc}", "ok": False})
    return rows


def main() -> int:
    print(f"machine: {machine()}")
    rows = []
    for fn in (
        bench_mobius_batch,
        bench_mobius_large,
        bench_sgd_step,
        bench_exact,
        bench_canonical,
        bench_cloze,
    ):
        rows.append(fn())
        _print(rows[-1])
    for row in other_benches():
        rows.append(row)
        _print(row)
    out = ROOT / "build" / "bench.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"machine": machine(), "results": rows}, indent=2))
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


def _print(r: dict) -> None:
    if "error" in r:
        print(f"  ERROR  {r['name']}: {r['error']}")
        return
    flag = "info" if r.get("target") is None else "ok  " if r.get("ok") else "MISS"
    target = "no target" if r.get("target") is None else f"target {r['target']:.2f}"
    print(
        f"  {flag} {r['name']}: ratio {r['ratio']:.2f} ({target}); "
        f"psens {r['psens_seconds'] * 1e3:.3f} ms, baseline {r['baseline_seconds'] * 1e3:.3f} ms"
        + "".join(
            f"; {k} {v:.3g}"
            for k, v in r.items()
            if k.startswith(("max_", "ips_", "flop_", "p_"))
            or k.endswith(("_per_s", "_per_game", "_hit_rate", "_calls"))
        )
    )


if __name__ == "__main__":
    raise SystemExit(main())
