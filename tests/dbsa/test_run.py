"""The stored DBSA run: config checks, the run on fake samplers, the file round trip, the
summary, and the shipped-run comparison of grouped files."""

from __future__ import annotations

import json
import re
import zlib
from pathlib import Path

import numpy as np
import pytest

import psens
from psens import dbsa as D
from psens import method_runs, store
from psens.cli import main
from psens.dbsa import run as dbsa_run
from tests.support import script_module

ROOT = Path(__file__).resolve().parents[2]
TEXTS = {"short": "The patient has heart failure and mild edema.", "other": "Pay the fee by May."}
NEIGHBOURS = {
    "patient": ["subject", "client"],
    "heart": ["cardiac"],
    "fee": ["sum"],
    "May": ["June"],
}


def keyword_backend(words):
    """Answers that change only when one of ``words`` is missing from the prompt."""

    def sample(prompt, n, *, temperature=1.0, max_tokens=16, seed=0):
        rng = np.random.default_rng(seed)
        present = set(re.findall(r"\w+", prompt))
        tag = " ".join(w if w in present else f"no-{w}" for w in words)
        return [f"{tag} {rng.integers(5)}" for _ in range(n)]

    return sample


def embed(texts, dim=64):
    out = np.zeros((len(texts), dim + 1))
    out[:, dim] = 1.0
    for r, text in enumerate(texts):
        for w in re.findall(r"[\w-]+", text):
            out[r, zlib.crc32(w.encode()) % dim] += 1.0
    return out


BACKENDS = {"smollm2-135m-instruct": ["heart"], "gemma3-270m": ["patient", "fee"]}


@pytest.fixture
def fakes(monkeypatch):
    monkeypatch.setattr(dbsa_run, "_backend", lambda model, cfg: keyword_backend(BACKENDS[model]))
    monkeypatch.setattr(dbsa_run, "_embedder", lambda: D.load_embedder(embed))


def _prompts(tmp_path, texts=TEXTS, neighbours=NEIGHBOURS, name="prompts.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"texts": texts, "neighbours": neighbours}))
    return str(path)


def _config(tmp_path, **over):
    raw = {
        "method": "dbsa",
        "store": str(tmp_path / "dbsa.nc"),
        "models": list(BACKENDS),
        "prompts": _prompts(tmp_path),
        "n": 6,
        "m": 6,
        "permutations": 99,
        **over,
    }
    return dbsa_run.DBSAConfig.from_dict(raw)


def test_run_stores_what_dbsa_computes_and_finds_each_models_words(tmp_path, fakes):
    cfg = _config(tmp_path)
    method_runs.run(cfg, progress=False)
    assert store.method_of(cfg.store) == "dbsa"
    res = dbsa_run.results(psens.open_run(cfg.store))
    assert set(res) == {"short", "other"} and set(res["short"]) == set(BACKENDS)
    # the stored statistics are those of a direct dbsa() call with the same inputs
    for model, words in BACKENDS.items():
        direct = D.dbsa(
            TEXTS["short"],
            D.CachedSampler(keyword_backend(words), model=model, max_tokens=cfg.max_tokens),
            NEIGHBOURS,
            embedder=embed,
            n=6,
            m=6,
            k=2,
            select="words",
            on_missing="skip",
            permutations=99,
            model=model,
        )
        got = res["short"][model]
        for var in ("statistic", "p_value_pair", "effect_size", "p_value"):
            np.testing.assert_array_equal(got[var].values, direct[var].values)
        assert list(got["token"].values) == list(direct["token"].values)
    # each fake model reacts to its own words only: they come out on top
    assert D.top_k(res["short"]["smollm2-135m-instruct"], 1)["token"].tolist() == ["heart"]
    assert D.top_k(res["short"]["gemma3-270m"], 1)["token"].tolist() == ["patient"]
    assert D.top_k(res["other"]["gemma3-270m"], 1)["token"].tolist() == ["fee"]


def test_summary_api_and_cli(tmp_path, fakes, capsys):
    cfg = _config(tmp_path)
    method_runs.run(cfg, progress=False)
    text = method_runs.summarize(psens.open_run(cfg.store))
    assert "Spearman rho(" in text and "expected by chance" in text
    assert main(["summary", cfg.store]) == 0
    assert "DBSA run: 2 prompts x 2 models" in capsys.readouterr().out


def _shipped_run_module():
    return script_module("shipped_run")


def test_shipped_run_compare_walks_the_groups(tmp_path, fakes):
    a = _config(tmp_path, store=str(tmp_path / "a.nc"))
    method_runs.run(a, progress=False)
    method_runs.run(_config(tmp_path, store=str(tmp_path / "b.nc")), progress=False)
    method_runs.run(_config(tmp_path, store=str(tmp_path / "c.nc"), seed=1), progress=False)
    compare = _shipped_run_module().compare
    assert compare(tmp_path / "a.nc", tmp_path / "b.nc") == []
    diffs = compare(tmp_path / "a.nc", tmp_path / "c.nc")
    assert any(d.startswith("/short/gemma3-270m:") for d in diffs)
    assert "attrs['seed']" in diffs


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"n": 1}, "n"),
        ({"temperature": 0.0}, "temperature=0.0 is outside"),
        ({"texts": ["nope"]}, "unknown texts"),
        ({"prompts": "/no/such/file.json"}, "not found"),
        ({"promts": "x.json"}, "Did you mean 'prompts'"),
    ],
)
def test_bad_configs_are_refused(tmp_path, over, message):
    with pytest.raises(ValueError, match=message):
        _config(tmp_path, **over)


def test_bad_prompt_files_are_refused(tmp_path):
    with pytest.raises(ValueError, match="no 'texts' table"):
        _config(tmp_path, prompts=_prompts(tmp_path, texts={}, name="bad.json"))
    with pytest.raises(ValueError, match="no 'neighbours' table"):
        _config(tmp_path, prompts=_prompts(tmp_path, neighbours={"a": "b"}, name="bad.json"))
    with pytest.raises(ValueError, match="cannot name a group"):
        _config(tmp_path, prompts=_prompts(tmp_path, texts={"a/b": "text"}, name="bad.json"))


def test_shipped_prompt_file_holds_the_papers_texts():
    texts, nb = dbsa_run.read_prompts(ROOT / "data" / "dbsa" / "appendix_e.json")
    assert set(texts) == {"legal", "clinical"}
    assert texts["clinical"].startswith("Patient is a 45-year-old male")
    assert "California" in texts["legal"] and nb["California"] == ["Nevada", "Oregon"]
