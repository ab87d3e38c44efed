"""DBSA pipeline: tokens, neighbours, cached sampling, aggregation, outputs."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from psens import dbsa as D
from psens.dbsa.ablations import (
    effect_sizes,
    metric_ablation,
    neighbour_ablation,
    rank_correlations,
    sample_size_ablation,
    statistic_ablation,
)
from psens.dbsa.highlight import compare_highlights, highlight, highlight_markdown
from psens.dbsa.neighbours import match_case, parse_synonyms
from psens.dbsa.tables import check_results, table_html
from tests.support import HOSTILE

TEXT = "John Doe is accused of murder. John Doe is innocent."
NEIGHBOURS = {
    "John": ["James", "Jack"],
    "Doe": ["Smith", "Roe"],
    "is": ["was", "remains"],
    "accused": ["suspected", "charged"],
    "of": ["for", "with"],
    "murder": ["theft", "fraud"],
    "innocent": ["blameless", "guiltless"],
}
VOCAB = ["verdict", "guilty", "trial", "jail", "fine", "calm", "weather", "sunny", "walk", "lunch"]


class FakeModel:
    """Answers from one distribution, unless the word 'murder' is present: then from another."""

    def __init__(self, trigger: str | None = "murder") -> None:
        self.trigger = trigger
        self.calls: list[tuple[str, int]] = []

    def __call__(
        self, prompt: str, n: int, *, temperature: float, max_tokens: int, seed: int
    ) -> list[str]:
        self.calls.append((prompt, n))
        rng = np.random.default_rng(seed)
        hot = self.trigger is not None and self.trigger in prompt
        pool = VOCAB[:5] if hot else VOCAB[5:]
        return [" ".join(rng.choice(pool, size=3)) for _ in range(n)]


def fake_embed(texts: list[str]) -> np.ndarray:
    """Bag of words over VOCAB (deterministic, no model)."""
    return np.array([[t.split().count(w) for w in VOCAB] for t in texts], dtype=float) + 0.01


@pytest.fixture(scope="module")
def result() -> xr.Dataset:
    return D.dbsa(
        TEXT,
        FakeModel(),
        NEIGHBOURS,
        embedder=fake_embed,
        n=12,
        m=12,
        k=2,
        permutations=199,
        model="fake",
    )


# ----------------------------------------------------------------------------- tokens


def test_tokenize_keeps_spans_numbers_and_punctuation() -> None:
    text = "Company A pays $10 million within 12 months. It's 50% of B’s cost."
    toks = D.tokenize(text)
    assert [t.text for t in toks][:8] == [
        "Company",
        "A",
        "pays",
        "$10",
        "million",
        "within",
        "12",
        "months",
    ]
    assert all(text[t.start : t.end] == t.text for t in toks)
    kinds = {t.text: t.kind for t in toks}
    assert kinds["$10"] == "number" and kinds["%"] == "punct" and kinds["’"] == "punct"
    uniq = D.unique_tokens(D.tokenize("a b a c a"))
    assert uniq == {"a": [0, 2, 4], "b": [1], "c": [3]}
    assert D.perturb(text, toks, 3, "$20") == text.replace("$10", "$20")


def test_empty_text_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="empty"):
        D.tokenize("   ")
    with pytest.raises(ValueError, match="empty"):
        D.dbsa("", FakeModel(), NEIGHBOURS, embedder=fake_embed)


# ----------------------------------------------------------------------------- neighbours


def test_dictionary_neighbours_match_case_and_k() -> None:
    out = D.dictionary_neighbours(
        ["Defendant", "defendant", "x"], {"Defendant": ["Accused", "Respondent", "Litigant"]}, 2
    )
    assert out == {
        "Defendant": ["Accused", "Respondent"],
        "defendant": ["Accused", "Respondent"],
        "x": [],
    }
    assert match_case("The", "this") == "This" and match_case("USA", "uk") == "UK"


def test_rule_neighbours_for_numbers_and_punctuation() -> None:
    assert D.number_neighbours("12", 3) == ["13", "11", "14"]
    assert D.number_neighbours("$10,000", 2) == ["$10,001", "$9,999"]
    assert D.number_neighbours("0", 2) == ["1", "2"]
    nb = D.resolve_neighbours([".", "12", "zzz"], {}, 3)
    assert nb["."] == [",", "!", "?"] and nb["12"] == ["13", "11", "14"] and nb["zzz"] == []


def test_llm_neighbours_through_any_generate_callable() -> None:
    seen: list[str] = []

    def generate(prompts: list[str]) -> list[str]:
        seen.extend(prompts)
        return ["1. Suspected\n2. charged\n3. accused\n4. indicted", '"firm", business, company.']

    out = D.llm_neighbours(["Accused", "company"], generate, k=2, context="He is accused.")
    assert out == {"Accused": ["Suspected", "Charged"], "company": ["firm", "business"]}
    assert "He is accused." in seen[0] and "2" in seen[0]
    assert parse_synonyms("Sure: a, b", "x", 3) == ["b"]


def test_embedding_neighbours_with_a_given_vocabulary() -> None:
    vecs = {
        "company": [1, 0, 0],
        "companies": [0.99, 0.1, 0],
        "firm": [0.9, 0.2, 0],
        "business": [0.8, 0.3, 0.1],
        "cat": [0, 0, 1],
    }
    nb = D.EmbeddingNeighbours(
        embedder=lambda ts: np.array([vecs[t.lower()] for t in ts], dtype=float),
        vocabulary=["companies", "firm", "business", "cat"],
    )
    assert nb(["Company"], k=2) == {
        "Company": ["Firm", "Business"]
    }  # inflection dropped, case matched


def test_token_without_neighbours_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"no neighbours for the token\(s\) \['innocent'\]"):
        D.collect(
            TEXT,
            FakeModel(),
            {k: v for k, v in NEIGHBOURS.items() if k != "innocent"},
            embedder=fake_embed,
            n=4,
        )
    ds = D.collect(
        TEXT,
        FakeModel(),
        {k: v for k, v in NEIGHBOURS.items() if k != "innocent"},
        embedder=fake_embed,
        n=4,
        on_missing="skip",
    )
    assert "innocent" not in set(ds["text_token"].values[ds["tested"].values])


@pytest.mark.parametrize("n", [0, 1])
def test_too_few_samples_is_a_clear_error(n: int) -> None:
    with pytest.raises(ValueError, match="n="):
        D.collect(TEXT, FakeModel(), NEIGHBOURS, embedder=fake_embed, n=n)
    with pytest.raises(ValueError, match="m="):
        D.collect(TEXT, FakeModel(), NEIGHBOURS, embedder=fake_embed, n=4, m=n)


# ----------------------------------------------------------------------------- sampling cache


def test_cache_only_samples_what_is_new(tmp_path) -> None:
    backend = FakeModel()
    s = D.CachedSampler(backend, model="fake", cache_dir=tmp_path)
    nb = {"murder": ["theft"], "John": ["James"]}
    D.collect(TEXT, s, nb, embedder=fake_embed, n=5, select=["murder", "John"])
    first = len(backend.calls)
    assert first == 1 + 2 + 1  # original + one prompt per (position, neighbour): John twice
    assert backend.calls[1][0] != backend.calls[2][0]

    s2 = D.CachedSampler(backend, model="fake", cache_dir=tmp_path)  # a re-run, new process
    D.collect(TEXT, s2, nb, embedder=fake_embed, n=5, select=["murder", "John"])
    assert len(backend.calls) == first and s2.stats["generated"] == 0

    nb2 = {"murder": ["theft", "fraud"], "John": ["James"]}  # one added neighbour
    D.collect(TEXT, s2, nb2, embedder=fake_embed, n=5, select=["murder", "John"])
    assert len(backend.calls) == first + 1 and "fraud" in backend.calls[-1][0]

    more = s2(TEXT, 8, seed=0)  # three more responses only
    assert backend.calls[-1] == (TEXT, 3) and len(more) == 8
    assert more[:5] == s2(TEXT, 5, seed=0)
    # the key holds model, prompt, params and seed
    s3 = D.CachedSampler(backend, model="fake", cache_dir=tmp_path, temperature=0.7)
    s3(TEXT, 2, seed=0)
    s2(TEXT, 2, seed=1)
    assert len(backend.calls) == first + 4


def test_sampler_uses_the_shared_cache_and_reads_its_files(tmp_path) -> None:
    import json

    from psens import backends

    assert D.ResponseCache is backends.ResponseCache
    s = D.CachedSampler(FakeModel(), model="fake", cache_dir=tmp_path, max_tokens=7)
    assert isinstance(s.cache, backends.ResponseCache) and s.cache.root == tmp_path
    # a file laid out as DBSA's cache always wrote it is served without sampling
    key = D.sample_key("fake", "hi", {"temperature": 1.0, "max_tokens": 7}, 0)
    record = {"model": "fake", "prompt": "hi", "params": {}, "seed": 0, "responses": ["a", "b"]}
    (tmp_path / key[:2]).mkdir()
    (tmp_path / key[:2] / f"{key}.json").write_text(json.dumps(record))
    assert s("hi", 2) == ["a", "b"] and s.stats["generated"] == 0
    assert s("hi", 3)[:2] == ["a", "b"] and s.stats["generated"] == 1
    assert len(json.loads(s.cache.path(key).read_text())["responses"]) == 3
    memory = D.CachedSampler(FakeModel(), model=None, cache_dir=tmp_path / "unused")
    assert memory.cache.root is None and not (tmp_path / "unused").exists()
    first = memory("hi", 2)
    assert memory("hi", 2) == first and memory.stats["generated"] == 2 and len(memory.cache) == 1


def test_backend_returning_the_wrong_count_is_caught() -> None:
    s = D.CachedSampler(lambda p, n, **kw: ["x"], model="bad")
    with pytest.raises(ValueError, match="returned 1 responses for n=3"):
        s("hi", 3)


# ----------------------------------------------------------------------------- analysis


def test_sensitive_word_ranks_first_with_small_p(result: xr.Dataset) -> None:
    table = D.top_k(result, k=5, alpha=0.05)
    assert list(table.columns[:4]) == ["token", "effect_size", "p_value", "significant"]
    assert table.loc[0, "token"] == "murder"
    assert table.loc[0, "p_value"] <= 2 / 200 and bool(table.loc[0, "significant"])
    assert result["p_value_mean"].sel(token="murder") <= 2 / 200
    others = result["effect_size"].drop_sel(token="murder")
    assert float(others.max()) < 0.1 * float(result["effect_size"].sel(token="murder"))
    assert (result["p_value"].drop_sel(token="murder") > 0.01).all()
    assert float(result["score"].sel(token="murder")) == 1.0


def test_aggregation_follows_algorithm_1(result: xr.Dataset) -> None:
    stat = result["statistic"].values
    texts = result["text_token"].values
    for w in ["John", "is", "murder"]:
        pos = np.flatnonzero(texts == w)
        e_bar = np.nanmean(stat[pos], axis=1)  # over neighbours (line 16)
        assert float(result["effect_size"].sel(token=w)) == pytest.approx(e_bar.mean())  # line 18
        p_bar = np.nanmean(result["p_value_pair"].values[pos], axis=1)
        assert float(result["p_value_mean"].sel(token=w)) == pytest.approx(p_bar.mean())
    assert (
        int(result["n_positions"].sel(token="John")) == 2
        and int(result["n_pairs"].sel(token="John")) == 4
    )
    # each pair's statistic is the energy distance between the stored embeddings
    i = int(np.flatnonzero(texts == "murder")[0])
    X = result["embedding_original"].values
    Y = result["embedding_perturbed"].values[i, 1]
    assert stat[i, 1] == pytest.approx(D.energy_distance(X, Y), rel=1e-5)


def test_dataset_layout_and_attrs(result: xr.Dataset) -> None:
    assert set(result.dims) >= {
        "position",
        "neighbour",
        "sample",
        "original_sample",
        "dim",
        "token",
    }
    assert result.sizes["position"] == len(D.tokenize(TEXT))
    assert (
        result.attrs["metric"] == "cosine"
        and result.attrs["n"] == 12
        and result.attrs["model"] == "fake"
    )
    assert list(result["token"].values) == [
        "John",
        "Doe",
        "is",
        "accused",
        "of",
        "murder",
        ".",
        "innocent",
    ]
    assert result["response_original"].shape == (12,)


def test_combined_p_value_is_calibrated_under_the_null() -> None:
    # a model that ignores its input: no token should look significant often
    ds = D.dbsa(
        TEXT,
        FakeModel(trigger=None),
        NEIGHBOURS,
        embedder=fake_embed,
        n=8,
        k=2,
        permutations=99,
        seed=3,
    )
    assert float(ds["p_value_combined"].min()) > 0.01
    assert float((ds["p_value_pair"] < 0.05).mean()) < 0.3


def test_reanalysis_with_other_settings_needs_no_model_call(result: xr.Dataset) -> None:
    again = D.analyse(
        result, metric="l2", statistic="mean", permutations=49, n=6, m=6, neighbours=1
    )
    assert (
        again.attrs["metric"] == "l2" and again.attrs["n_used"] == 6 and again.attrs["k_used"] == 1
    )
    assert D.top_k(again, 1).loc[0, "token"] == "murder"
    emd = D.analyse(result, statistic="emd", permutations=49)
    assert D.top_k(emd, 1).loc[0, "token"] == "murder"


# ----------------------------------------------------------------------------- outputs


def test_highlight_html(result: xr.Dataset) -> None:
    h = highlight(result)
    html = h._repr_html_()
    assert html == str(h) == h.html
    assert "<script" not in html.lower()
    assert "rgba(214,39,40,1.000)" in html  # murder, the top token, fully shaded
    assert "Most important" in html and "Least important" in html
    assert 'title="murder: E=' in html
    top1 = highlight(result, top=1).html
    assert top1.count("rgba(214,39,40,") == 4 + 1  # legend (4 colour stops) + one token
    esc = highlight_html_escape()
    assert "&lt;b&gt;" in esc
    md = highlight_markdown(result, top=1)
    assert "**murder**<sup>1.00</sup>" in md
    both = compare_highlights({"a": result, "b": result}).html
    assert both.count("psens-dbsa-highlight") == 2


def highlight_html_escape() -> str:
    from psens.dbsa.highlight import highlight_html

    return highlight_html("<b> x", [(0, 3), (4, 5)], [1.0, float("nan")])


def test_view_of_two_results(result: xr.Dataset) -> None:
    pytest.importorskip("altair")
    other = D.analyse(result, metric="l1", permutations=19)
    view = D.dbsa_view(result, other, names=("cos", "l1"), k=2, title="t")
    assert set(view) == {"html_a", "html_b", "table", "table_html", "chart"}
    assert set(view["table"]["model"]) == {"cos", "l1"}
    assert "cos: top 2" in view["table_html"] and "l1: top 2" in view["table_html"]
    assert 'title="murder: E=' in view["html_a"] and ">cos</div>" in view["html_a"]
    spec = view["chart"].to_dict()
    assert spec["title"] == "t" and spec["params"][0]["name"] == "pick"
    # score: each model's own normalised score; effect_size: one scale over both
    np.testing.assert_allclose(
        D.shading(result, "score", 1.0, None),
        np.clip(result["score_position"].values, 0, 1),
        equal_nan=True,
    )
    scale = float(result["effect_size"].max()) * 2
    eff = D.shading(result, "effect_size", scale, {"murder"})
    tokens = [str(t) for t in result["text_token"].values]
    assert np.nanmax(eff) == pytest.approx(0.5)
    assert all(np.isnan(v) for v, t in zip(eff, tokens, strict=True) if t != "murder")
    with pytest.raises(ValueError, match="value="):
        D.dbsa_view(result, result, names=("a", "a"), value="nope")


def test_view_inputs_and_statistics(result: xr.Dataset) -> None:
    assert D.available_statistics(result) == ["energy", "emd", "mean"]
    bare = result.drop_vars(["embedding_original", "embedding_perturbed"])
    assert D.available_statistics(bare) == ["energy"]
    assert list(check_results({1: result}, "here")) == ["1"]
    with pytest.raises(TypeError, match="here"):
        check_results([result], "here")
    with pytest.raises(ValueError, match="no models"):
        check_results({}, "here")
    with pytest.raises(ValueError, match="no scores"):
        check_results({"x": bare.drop_vars("effect_size")}, "here")


def test_view_html_escapes_the_data(result: xr.Dataset) -> None:
    table = pd.DataFrame(
        {
            "model": [HOSTILE],
            "token": [HOSTILE],
            "rank": [1],
            "top": [True],
            "effect_size": [0.5],
            "p_value": [0.01],
            "significant": [True],
        }
    )
    out = table_html(table, 1)
    assert "<script>" not in out and "&lt;/script&gt;&lt;script&gt;alert(1)" in out
    pytest.importorskip("altair")
    view = D.dbsa_view(result, result, names=(HOSTILE, HOSTILE), k=1)
    for key in ("html_a", "html_b", "table_html"):
        assert "<script>" not in view[key] and "alert(1)" in view[key]


def test_rank_correlations_and_ablations(result: xr.Dataset) -> None:
    other = D.dbsa(
        TEXT,
        FakeModel(),
        NEIGHBOURS,
        embedder=fake_embed,
        n=12,
        k=2,
        permutations=19,
        seed=5,
        model="other",
    )
    corr = rank_correlations({"fake": result, "other": other})
    assert corr.shape == (2, 2) and corr.loc["fake", "fake"] == 1.0
    assert corr.loc["fake", "other"] == corr.loc["other", "fake"]
    tidy = rank_correlations([result, other], tidy=True)
    assert (
        list(tidy.columns) == ["model_a", "model_b", "spearman", "n_tokens"]
        and tidy.loc[0, "n_tokens"] == 8
    )
    m = metric_ablation({"fake": result})
    assert (
        set(m["pair"]) == {"cosine vs l1", "cosine vs l2", "l1 vs l2"}
        and m["spearman"].notna().all()
    )
    s = statistic_ablation({"fake": result})
    assert len(s) == 3
    n = sample_size_ablation({"fake": result, "other": other}, sizes=(3, 6, 12), prompt="legal")
    assert list(n["n_samples"]) == [3, 6, 12] and (n["prompt"] == "legal").all()
    n1 = sample_size_ablation({"fake": result}, sizes=(4, 12))
    assert n1["spearman"].iloc[-1] == pytest.approx(1.0)
    k = neighbour_ablation({"fake": result}, ks=(1, 2))
    assert k["spearman"].iloc[-1] == pytest.approx(1.0)
    e = effect_sizes({"fake": result, "other": other})
    assert isinstance(e, pd.DataFrame) and len(e) == 16


def test_charts_are_altair_objects(result: xr.Dataset) -> None:
    alt = pytest.importorskip("altair")
    from psens.dbsa import charts as plots

    other = D.analyse(result, metric="l1", permutations=9).assign_attrs(model="l1")
    charts = [
        plots.effect_size_chart(effect_sizes({"cos": result, "l1": other})),
        plots.rank_correlation_chart(rank_correlations({"cos": result, "l1": other})),
        plots.metric_ablation_chart(metric_ablation({"fake": result})),
        plots.sample_size_chart(sample_size_ablation({"fake": result}, sizes=(3, 12))),
        plots.top_k_chart(D.top_k(result)),
    ]
    for c in charts:
        assert isinstance(c, alt.TopLevelMixin)
        c.to_dict()  # a valid Vega-Lite spec


def test_core_import_is_light() -> None:
    code = (
        "import sys, psens.dbsa, psens.dbsa.charts, psens.dbsa.ablations; "
        "heavy = ('torch', 'altair', 'sentence_transformers', 'transformers', 'ipywidgets'); "
        "bad = [m for m in heavy if m in sys.modules]; "
        "print(bad)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "[]"


def test_client_sampler_drives_an_openai_style_client() -> None:
    class Res:
        def __init__(self, text: str | None) -> None:
            self.text, self.ok, self.error = text, text is not None, "boom"

    class Client:
        concurrency = 3

        def __init__(self) -> None:
            self.calls: list[dict] = []

        def chat(self, messages, **params):
            self.calls.append(params)
            return Res(f"{messages[0]['content']}|{params['seed']}")

        def complete(self, prompt, **params):
            return Res(None)

    c = Client()
    out = D.client_sampler(c)("hi", 4, temperature=1.0, max_tokens=7, seed=2)
    assert len(out) == 4 and len(set(out)) == 4 and all(o.startswith("hi|") for o in out)
    assert {p["max_tokens"] for p in c.calls} == {7} and {p["temperature"] for p in c.calls} == {
        1.0
    }
    assert out == D.client_sampler(Client())("hi", 4, temperature=1.0, max_tokens=7, seed=2)
    with pytest.raises(RuntimeError, match="failed"):
        D.client_sampler(c, chat=False)("hi", 2, temperature=1.0, max_tokens=7, seed=0)


def test_highlight_markdown_escapes_item_text(result: xr.Dataset) -> None:
    """HTML or Markdown in an item's text is shown as text, never run or linked."""
    hostile = result.copy()
    hostile.attrs = {**result.attrs, "text": result.attrs["text"] + " <img src=x onerror=alert(1)>"}
    tokens = hostile["text_token"].values.astype(object)
    tokens[0] = "[x](javascript:alert(1))"
    hostile = hostile.assign_coords(text_token=(hostile["text_token"].dims, tokens))
    md = highlight_markdown(hostile, top=1)
    assert "<img" not in md and "&lt;img src=x onerror=alert(1)&gt;" in md
    assert "[x](javascript" not in md and "\\[x\\](javascript:alert(1))" in md
    assert "**murder**<sup>1.00</sup>" in md  # psens' own markup is kept
