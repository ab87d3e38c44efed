"""EASZones and PSSByVariant without a browser: set traits, assert on chart data.

A click coming back from the browser is faked by setting ``jchart._vl_selections`` (the
synced trait the JavaScript side writes), as in tests/test_widgets.py.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

pytest.importorskip("ipywidgets")
pytest.importorskip("altair")

import psens.widgets as W
from psens.eas import build_rows, instance_detail, instance_metrics, thresholds, zones
from psens.eas import charts as po
from psens.pss import charts as pss_charts
from psens.pss import instance_pss, pss, variant_disagreement
from psens.variants import PROSA_STYLES, PROSA_TEMPLATE_IDS
from tests.support import HOSTILE, REFERENCE

SAMPLE = REFERENCE / "eas" / "judged_gpt4o_arc_sample.jsonl"


def _judged(seed: int = 0) -> pd.DataFrame:
    """Judged rows for 2 models × 6 ARC-like items × 8 templates with known responses."""
    rng = np.random.default_rng(seed)
    items = [
        {
            "id": f"q{i}",
            "question": f"Question {i}?",
            "options": [("A", "alpha"), ("B", "beta"), ("C", "gamma"), ("D", "delta")],
            "answer": "ABCD"[i % 4],
        }
        for i in range(6)
    ]
    frames = []
    for model in ("m1", "m2"):
        rows = build_rows(items, dataset="arc_challenge", model_name=model)
        gold = rows["gold_answer"].to_numpy()
        right = rng.random(len(rows)) < 0.6
        wrong = np.where(gold == "A", "B", "A")
        letter = np.where(right, gold, wrong)
        # some responses start with the article "a": the published scorer reads it as "A"
        article = rng.random(len(rows)) < 0.3
        rows["raw_response"] = [
            f"a guess: {x}" if art else f"The answer is ({x})"
            for x, art in zip(letter, article, strict=True)
        ]
        rows["judge_correct"] = right
        rows["judge_raw"] = np.where(right, "correct", "incorrect")
        frames.append(rows)
    return pd.concat(frames, ignore_index=True)


def _values(jchart) -> list[dict]:
    spec = jchart.spec
    out = []
    for data in spec.get("datasets", {}).values():
        out += data
    return out


def _click(w, field, values):
    points = [{field: v} for v in values]
    w.jchart._vl_selections = {"pick": {"value": {"vlPoint": {"or": points}}, "store": []}}


@pytest.fixture(scope="module")
def rows():
    return _judged()


def test_exported():
    assert {"EASZones", "PSSByVariant"} <= set(W.__all__)
    with open(po.__file__) as fh:
        assert "ipywidgets" not in fh.read()


# ----------------------------------------------------------------------------- EASZones


def test_zones_scatter_uses_pooled_thresholds(rows):
    w = W.EASZones(rows=rows)
    inst = instance_metrics(rows)
    expected = thresholds(inst.sens_heuristic, inst.sens_judge)
    assert w.thresholds == pytest.approx(expected)
    values = _values(w.jchart)
    assert len(values) == len(inst) == 12
    assert [v["th_h"] for v in values] == pytest.approx([expected[0]] * 12)
    by_key = {v["key"]: v["zone"] for v in values}
    want = zones(inst.sens_heuristic, inst.sens_judge).to_numpy()
    for key, zone in zip(po.instance_key(inst), want, strict=True):
        assert by_key[key] == zone
    assert "instances" in w.status.value


def test_filters_keep_the_pooled_thresholds_unless_asked(rows):
    w = W.EASZones(rows=rows)
    pooled = w.thresholds
    w.model = "m2"
    assert {v["model_name"] for v in _values(w.jchart)} == {"m2"}
    assert w.thresholds == pooled  # published rule: pooled over the whole table
    w.pool = "shown"
    shown = w.tables["instances"]
    assert w.thresholds == pytest.approx(thresholds(shown.sens_heuristic, shown.sens_judge))
    w.q = 0.5
    assert w.thresholds == pytest.approx(thresholds(shown.sens_heuristic, shown.sens_judge, q=0.5))
    with pytest.raises(ValueError):
        w.model = "nope"


def test_scorer_switch_recomputes_with_the_published_scorers(rows):
    w = W.EASZones(rows=rows)
    corrected = w.tables["instances"].set_index("key")["sens_heuristic"]
    w.scorer = "eas"
    compat = w.tables["instances"].set_index("key")["sens_heuristic"]
    ref = instance_metrics(rows, compat="eas")
    assert compat.to_numpy() == pytest.approx(ref["sens_heuristic"].to_numpy())
    assert not np.allclose(corrected.to_numpy(), compat.to_numpy())  # "a guess" → A


def test_click_shows_the_instance_templates(rows):
    w = W.EASZones(rows=rows)
    got = []
    w.on_select(got.append)
    key = "m1|arc_challenge|q3"
    _click(w, "key", [key])
    assert w.instance == key and got == [[key]] and w.selected == [key]
    detail = w.tables["detail"]
    assert list(detail["template_id"]) == sorted(detail["template_id"]) and len(detail) == 8
    sub = rows[(rows.model_name == "m1") & (rows.id == "q3")].sort_values("template_id")
    assert detail["judge"].to_numpy() == pytest.approx(sub["judge_correct"].astype(float))
    inst = instance_metrics(rows).set_index(["model_name", "id"]).loc[("m1", "q3")]
    assert detail["heuristic"].std(ddof=0) == pytest.approx(inst["sens_heuristic"])
    assert detail["judge"].std(ddof=0) == pytest.approx(inst["sens_judge"])
    side = _values(w.detail_chart)
    assert len(side) == 16 and {v["evaluator"] for v in side} == {"heuristic", "judge"}
    assert "SensH" in w.detail_html.value and "The answer is" in w.detail_html.value
    w.on_select(got.append, remove=True)
    _click(w, "key", [])
    assert got == [[key]] and w.instance == key  # an empty pick keeps the detail


def test_hostile_ids_are_shown_not_run(rows):
    bad = rows.assign(id=rows["id"].where(rows["id"] != "q3", HOSTILE), model_name="m1")
    bad = bad.drop_duplicates(["id", "template_id"]).assign(raw_response=HOSTILE)
    w = W.EASZones(rows=bad, model="m1")
    w.instance = f"m1|arc_challenge|{HOSTILE}"
    html = w.detail_html.value
    assert "<script>" not in html and html.count("alert(1)") >= 2
    assert "<script>" not in w.status.value


def test_instances_only_and_errors(rows):
    inst = instance_metrics(rows)
    w = W.EASZones(inst)
    assert "scorer" not in w.controls
    w.instance = po.instance_key(inst).iloc[0]
    assert w.tables["detail"].empty and "rows=" in w.detail_html.value
    w.dataset = "arc_challenge"
    w.task = "mcq"
    assert len(w.tables["instances"]) == 12
    with pytest.raises(ValueError):
        W.EASZones()
    with pytest.raises(ValueError):
        W.EASZones(inst.drop(columns="sens_judge"))
    with pytest.raises(ValueError):
        w.instance = "no|such|key"


def test_controls_drive_the_traits(rows):
    w = W.EASZones(rows=rows)
    w.controls["model"].value = "m1"
    assert w.model == "m1"
    w.pool = "shown"
    assert w.controls["pool"].value == "shown"


def test_published_sample_reproduces_compat_heuristic_means():
    sample = pd.read_json(SAMPLE, lines=True)
    w = W.EASZones(rows=sample, scorer="eas")
    ref = pd.read_csv(REFERENCE / "eas" / "metrics_instance.csv")
    ref = ref[(ref.model_name == "gpt-4o") & ref.id.isin(sample.id)].set_index("id")
    got = w.tables["instances"].set_index("id").loc[ref.index]
    assert got["sens_heuristic"].to_numpy() == pytest.approx(ref["sens_heuristic"].to_numpy())


# ----------------------------------------------------------------------------- PSSByVariant


@pytest.fixture(scope="module")
def prosa():
    rng = np.random.default_rng(2)
    models, n, shots = ["small", "large"], 20, [0, 1, 3]
    variants = list(PROSA_TEMPLATE_IDS)
    style = [s for s, ids in PROSA_STYLES.items() for _ in ids]
    p = rng.uniform(0.2, 0.9, size=(len(models), n, 1, len(variants)))
    p = p + np.array([0.25, 0.05])[:, None, None, None] * rng.normal(size=p.shape)
    graded = np.clip(np.broadcast_to(p, (2, n, 3, 12)) + 0.0, 0, 1)
    binary = (rng.random(graded.shape) < graded).astype(float)
    binary[0, 0, 0, :11] = np.nan  # one instance with a single valid variant: skipped
    coords = {"model": models, "sample": [f"s{i}" for i in range(n)], "shot": shots}
    coords |= {"variant": variants, "style": ("variant", style)}
    dims = ("model", "sample", "shot", "variant")
    return xr.Dataset({"correct": (dims, binary), "score": (dims, graded)}, coords=coords)


def test_pss_per_model_matches_the_metric(prosa):
    w = W.PSSByVariant(prosa)
    assert w.score == "binary" and w.view == "model" and w.shot == 0
    t = w.tables["model"].set_index("model")
    for m in ("small", "large"):
        s = prosa["correct"].sel(model=m, shot=0).transpose("sample", "variant").values
        summary = pss(s, return_counts=True)
        assert t.loc[m, "pss"] == pytest.approx(summary.pss)
        assert t.loc[m, "n_skipped"] == summary.n_skipped
    assert int(t.loc["small", "n_skipped"]) == 1
    vals = {v["model"]: v["pss"] for v in _values(w.jchart)}
    assert vals == pytest.approx(t["pss"].to_dict())


def test_graded_and_shot_controls(prosa):
    w = W.PSSByVariant(prosa)
    w.score = "graded"
    w.shot = 3
    s = prosa["score"].sel(model="large", shot=3).transpose("sample", "variant").values
    assert w.tables["model"].set_index("model").loc["large", "pss"] == pytest.approx(pss(s))
    w.view = "shot"
    rows = {(v["model"], v["shot"]): v["pss"] for v in _values(w.jchart)}
    assert len(rows) == 6
    s1 = prosa["score"].sel(model="small", shot=1).transpose("sample", "variant").values
    assert rows[("small", 1)] == pytest.approx(pss(s1))
    with pytest.raises(ValueError):
        w.shot = 2
    w.controls["score"].value = "binary"
    assert w.score == "binary"


def test_per_variant_disagreement_averages_to_pss(prosa):
    w = W.PSSByVariant(prosa, view="variant")
    t = w.tables["variant"]
    assert len(t) == 24 and set(t["style"]) == set(PROSA_STYLES)
    s = prosa["correct"].sel(model="large", shot=0).transpose("sample", "variant").values
    d = variant_disagreement(s)
    np.testing.assert_allclose(np.nanmean(d, axis=1), instance_pss(s))  # mean_p D_p = S_i
    large = t[t.model == "large"]
    assert large["disagreement"].to_numpy() == pytest.approx(np.nanmean(d, axis=0))
    assert large["mean_score"].to_numpy() == pytest.approx(np.nanmean(s, axis=0))
    assert len(_values(w.jchart)) == 24


def test_per_style_pss(prosa):
    w = W.PSSByVariant(prosa, view="style", score="graded")
    t = w.tables["style"].set_index(["model", "style"])
    ids = list(PROSA_STYLES["role"])
    s = prosa["score"].sel(model="small", shot=0, variant=ids).transpose("sample", "variant")
    assert t.loc[("small", "role"), "pss"] == pytest.approx(pss(s.values))


def test_model_selection_and_pick(prosa):
    w = W.PSSByVariant(prosa)
    w.models = ["large"]
    assert list(w.tables["model"]["model"]) == ["large"]
    assert {v["model"] for v in _values(w.jchart)} == {"large"}
    got = []
    w.on_select(got.append)
    _click(w, "model", ["large"])
    assert got == [["large"]] and w.selected == ["large"]
    with pytest.raises(ValueError):
        w.models = ["nope"]
    only_binary = W.PSSByVariant(prosa.drop_vars("score"))
    assert list(only_binary.controls["score"].options) == [("binary (correct)", "binary")]
    with pytest.raises(ValueError):
        only_binary.score = "graded"


def test_works_on_eas_to_dataset(rows):
    from psens.eas import to_dataset

    ds = to_dataset(rows)
    w = W.PSSByVariant(ds, variables={"binary": "heuristic", "graded": "judge"})
    assert w.views == ["model", "variant"]
    t = w.tables["model"].set_index("model")
    h = ds["heuristic"].sel(model="m1").transpose("sample", "template").values
    assert t.loc["m1", "pss"] == pytest.approx(pss(h))
    w.view = "variant"
    assert set(w.tables["variant"]["variant"]) == set(ds["template"].values.tolist())
    with pytest.raises(TypeError):
        W.PSSByVariant(ds["heuristic"])
    with pytest.raises(ValueError):
        W.PSSByVariant(ds, variables={"binary": "nope"})


def test_variant_disagreement_edge_cases():
    d = variant_disagreement(np.array([[1.0, 0.0, 0.0], [1.0, np.nan, np.nan]]))
    np.testing.assert_allclose(d[0], [1.0, 0.5, 0.5])
    assert np.isnan(d[1]).all()


def test_chart_extensions_are_valid_vega_lite(rows):
    inst = instance_metrics(rows)
    key = po.instance_key(inst).iloc[3]
    chart = po.zones_scatter(inst, select="pick", highlight=key)
    spec = chart.to_dict()
    assert len(spec["layer"]) == 4  # points, two rules, the ring
    assert int(chart.data["picked"].sum()) == 1
    assert len(po.zones_scatter(inst, highlight="absent").to_dict()["layer"]) == 3
    detail = instance_detail(rows, key)
    side = po.template_scores(detail, title="x")
    assert len(side.data) == 16 and side.to_dict()["title"] == "x"
    table = pd.DataFrame({"model": ["a", "b"], "pss": [0.1, 0.2], "ci_lo": [0, 0.1]})
    table["ci_hi"] = [0.2, 0.3]
    assert pss_charts.pss_by_model(table, select="pick", title="t").to_dict()["params"]
    shot = pd.DataFrame({"model": ["a", "a"], "shot": [0, 1], "pss": [0.3, 0.2]})
    assert pss_charts.pss_by_shot(shot, select="pick").to_dict()["params"]


def test_pss_of_a_lazily_opened_run_equals_the_loaded_run(tmp_path):
    """A run opened from its store is chunked (dask): the metric reads it once instead of
    failing in apply_ufunc."""
    import psens
    from psens import store
    from psens.synthetic import synthetic_run

    path = store.save(synthetic_run(n_samples=4, n_vars=(3,), shots=[0, 1]), tmp_path / "r.zarr")
    lazy = psens.open_run(path)
    assert lazy["correct"].chunks is not None
    got = instance_pss(lazy["correct"])
    want = instance_pss(lazy["correct"].load())
    np.testing.assert_array_equal(got.values, want.values)
    a, b = W.PSSByVariant(psens.open_run(path)), W.PSSByVariant(lazy.load())
    pd.testing.assert_frame_equal(a.tables["model"], b.tables["model"])
