"""DBSAHighlights and its chart helpers on synthetic DBSA results (no model, no browser)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

pytest.importorskip("ipywidgets")
pytest.importorskip("altair")

import psens.widgets as W
from psens import dbsa as D
from psens.dbsa import charts as plots
from psens.dbsa.charts import compare_top_k, compare_top_k_chart
from tests.support import HOSTILE

TEXT = "John Doe is accused of murder in Paris."
NEIGHBOURS = {
    "John": ["James", "Jack"],
    "Doe": ["Smith", "Roe"],
    "is": ["was", "remains"],
    "accused": ["suspected", "charged"],
    "of": ["for", "with"],
    "murder": ["theft", "fraud"],
    "in": ["near", "at"],
    "Paris": ["Lyon", "Rome"],
}
WORDS = list(NEIGHBOURS)
VOCAB = ["verdict", "guilty", "trial", "jail", "fine", "calm", "weather", "sunny", "walk", "lunch"]


class Fake:
    """Responses drawn from a pool that shifts when a trigger word is replaced.

    ``weights[w]`` is the share of each response's words that depends on ``w``: the larger it
    is, the more replacing ``w`` moves the output distribution.
    """

    def __init__(self, weights: dict[str, float]) -> None:
        self.weights = weights

    def __call__(
        self, prompt: str, n: int, *, temperature: float, max_tokens: int, seed: int
    ) -> list[str]:
        rng = np.random.default_rng(seed)
        out = []
        for _ in range(n):
            words = []
            for w, share in self.weights.items():
                pool = VOCAB[:5] if w in prompt.split() or w + "." in prompt else VOCAB[5:]
                words += list(rng.choice(pool, size=round(10 * share)))
            words += list(rng.choice(VOCAB, size=4))
            out.append(" ".join(words))
        return out


def embed(texts: list[str]) -> np.ndarray:
    return np.array([[t.split().count(w) for w in VOCAB] for t in texts], dtype=float) + 0.01


def _run(weights: dict[str, float], name: str) -> xr.Dataset:
    return D.dbsa(
        TEXT,
        Fake(weights),
        NEIGHBOURS,
        embedder=embed,
        n=8,
        k=2,
        select=WORDS,
        permutations=49,
        model=name,
    )


@pytest.fixture(scope="module")
def results() -> dict[str, xr.Dataset]:
    return {
        "fake-a": _run({"murder": 0.8, "Paris": 0.4}, "fake-a"),
        "fake-b": _run({"John": 0.8, "murder": 0.3}, "fake-b"),
        "fake-c": _run({"accused": 0.6}, "fake-c"),
    }


def _spec_values(w) -> list[dict]:
    values = []
    for data in w.jchart.spec.get("datasets", {}).values():
        values += data
    return values


def _pick(w, tokens):
    points = [{"token": t} for t in tokens]
    w.jchart._vl_selections = {"pick": {"value": {"vlPoint": {"or": points}}, "store": []}}


# ----------------------------------------------------------------------------- pure helpers


def test_compare_top_k_table(results):
    t = compare_top_k({m: results[m] for m in ("fake-a", "fake-b")}, k=2)
    assert t.attrs["order"][:2] == ["murder", "John"]  # each model's rank 1 first
    a = t[t.model == "fake-a"].set_index("token")
    assert a.loc["murder", "rank"] == 1 and a.loc["murder", "top"]
    assert not a.loc["John", "top"]  # John is only in fake-b's top 2, looked up in fake-a
    ref = D.top_k(results["fake-a"], 2)
    assert a[a["top"]]["effect_size"].tolist() == pytest.approx(ref["effect_size"].tolist())
    assert (t["significant"] == (t["p_value"] < 0.05)).all()
    with pytest.raises(ValueError, match="no results"):
        compare_top_k({}, 2)


def test_compare_top_k_chart_is_ui_free_and_carries_the_table(results):
    t = compare_top_k(results, k=3)
    ch = compare_top_k_chart(t, value="score", select="pick").to_dict()
    assert ch["encoding"]["x"]["field"] == "score"
    assert ch["encoding"]["y"]["sort"] == t.attrs["order"]
    assert ch["params"][0]["name"] == "pick"
    with pytest.raises(ValueError, match="value"):
        compare_top_k_chart(t, value="nope")
    with open(plots.__file__) as fh:
        assert "ipywidgets" not in fh.read()


# ----------------------------------------------------------------------------- widget


def test_widget_defaults_and_view(results):
    w = W.DBSAHighlights(results, k=2)
    assert (w.model_a, w.model_b, w.statistic, w.metric) == ("fake-a", "fake-b", "energy", "cosine")
    assert w.statistics == ["energy", "emd", "mean"]  # embeddings stored: all available
    assert "psens-dbsa-highlight" in w.html_a.value and "fake-a" in w.html_a.value
    assert "fake-b" in w.html_b.value
    # murder is fake-a's top token: fully shaded in A; John is fake-b's
    assert (
        'rgba(214,39,40,1.000);color:#fff;border-radius:0.2em;padding:0.05em 0.1em" title="murder'
        in w.html_a.value
    )
    assert 'title="John: E=' in w.html_b.value
    assert "fake-a: top 2" in w.table_html.value and "fake-b: top 2" in w.table_html.value
    values = _spec_values(w)
    assert {r["model"] for r in values} == {"fake-a", "fake-b"}
    assert {"murder", "John"} <= {r["token"] for r in values}
    assert "Spearman" in w.status.value


def test_widget_controls_follow_traits(results):
    w = W.DBSAHighlights(results, k=2)
    jchart = w.jchart
    w.controls["model_b"].value = "fake-c"
    assert w.model_b == "fake-c"
    assert {r["model"] for r in _spec_values(w)} == {"fake-a", "fake-c"}
    assert "accused" in {r["token"] for r in _spec_values(w)}
    assert "fake-c" in w.html_b.value
    w.k = 4
    assert w.controls["k"].value == 4
    top = w.tables["top_k"]
    assert top.groupby("model")["top"].sum().tolist() == [4, 4]
    assert jchart is w.jchart  # updated in place
    with pytest.raises(ValueError, match="model_a"):
        w.model_a = "gpt-nope"
    with pytest.raises(ValueError, match="k="):
        w.k = 99


def test_statistic_and_distance_reanalyse(results):
    w = W.DBSAHighlights(results, k=3)
    energy = w.tables["top_k"].copy()
    w.statistic = "emd"
    assert w.tables["a"].attrs["statistic"] == "emd"
    ref = D.analyse(results["fake-a"], statistic="emd", permutations=49)
    got = w.tables["top_k"].query("model == 'fake-a'").set_index("token")["effect_size"]
    exp = pd.Series(ref["effect_size"].values, index=map(str, ref["token"].values))
    assert got.to_numpy() == pytest.approx(exp[got.index].to_numpy())
    assert not np.allclose(
        energy.query("model == 'fake-a'")["effect_size"].to_numpy()[:1], got.to_numpy()[:1]
    )
    assert "EMD" in str(w.jchart.spec["title"])
    w.metric = "l2"
    assert w.tables["a"].attrs["metric"] == "l2"
    w.statistic, w.metric = "energy", "cosine"
    assert w.tables["a"] is results["fake-a"]  # the stored analysis, not a recomputation
    with pytest.raises(ValueError, match="statistic"):
        w.statistic = "kl"


def test_score_vs_effect_size_and_top_only(results):
    w = W.DBSAHighlights(results, k=1)
    # score: each model's top token is fully shaded
    assert w.html_b.value.count("rgba(214,39,40,1.000);color:#fff") == 1
    w.value = "effect_size"  # one scale for both models: only the overall largest ω is full
    a, b = results["fake-a"], results["fake-b"]
    top_a, top_b = float(a["effect_size"].max()), float(b["effect_size"].max())
    full = w.html_a.value if top_a >= top_b else w.html_b.value
    other = w.html_b.value if top_a >= top_b else w.html_a.value
    assert "rgba(214,39,40,1.000)" in full.split("Least important")[1]
    assert "rgba(214,39,40,1.000)" not in other.split("Least important")[1]
    assert w.jchart.spec["encoding"]["x"]["field"] == "effect_size"
    w.top_only = True  # paper table 3: only the top k shaded
    body = w.html_a.value.split("Least important")[1]
    assert body.count("background-color:rgba") == 1


def test_single_model_and_bad_input(results):
    w = W.DBSAHighlights({"only": results["fake-a"]})
    assert w.model_a == w.model_b == "only"
    assert set(w.tables["top_k"]["model"]) == {"only"}
    assert "of the top" in w.status.value
    with pytest.raises(TypeError, match="results"):
        W.DBSAHighlights([results["fake-a"]])
    with pytest.raises(ValueError, match="different texts"):
        other = results["fake-b"].copy()
        other.attrs = {**other.attrs, "text": "Something else."}
        W.DBSAHighlights({"a": results["fake-a"], "b": other})
    collected = results["fake-a"].drop_vars(["embedding_original", "embedding_perturbed"])
    w = W.DBSAHighlights({"x": collected})
    assert w.statistics == ["energy"] and w.metrics == ["cosine"]


def test_pick_tokens_on_the_chart(results):
    w = W.DBSAHighlights(results, k=2)
    got = []
    w.on_select(got.append)
    _pick(w, ["murder"])
    assert got == [["murder"]] and w.selected == ["murder"]
    assert "theft" in w.details.value and "fraud" in w.details.value
    pairs = w.pair_table("murder")
    assert set(pairs["model"]) == {"fake-a", "fake-b"} and len(pairs) == 4
    w.on_select(got.append, remove=True)
    _pick(w, ["John"])
    assert got == [["murder"]] and w.selected == ["John"]
    w.k = 3  # a new chart drops the pick
    assert w.selected == []
    assert "Click a bar" in w.details.value


def test_hostile_model_names_are_shown_not_run(results):
    w = W.DBSAHighlights({HOSTILE: results["fake-a"], "b": results["fake-b"]}, k=2)
    w.model_b = HOSTILE  # the single-model status line names the model
    for html in (w.html_a.value, w.table_html.value, w.status.value):
        assert "<script>" not in html and "alert(1)" in html


def test_exported():
    assert "DBSAHighlights" in W.__all__
    assert W.dbsa_highlights.dbsa_view is D.dbsa_view
