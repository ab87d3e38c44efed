"""EAS metrics (published-data reproduction), templates and EAS charts."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from psens.eas import (
    DATASET_COLUMNS,
    INSTANCE_COLUMNS,
    aggregate,
    bootstrap_ci,
    build_rows,
    factor_effects,
    instance_detail,
    instance_detail_html,
    instance_key,
    instance_metrics,
    thresholds,
    to_dataset,
    zones,
)
from psens.variants import (
    EAS_TEMPLATE_IDS,
    PROSA_STYLES,
    PROSA_TEMPLATE_IDS,
    SHOT_COUNTS,
    Item,
    eas_factors,
    render_variant,
)
from tests.support import HOSTILE, REFERENCE

EAS_DIR = REFERENCE / "eas"
KEY_COLS = ["dataset", "model_name", "task_type"]


@pytest.fixture(scope="module")
def published_instances():
    return pd.read_csv(EAS_DIR / "metrics_instance.csv")


@pytest.fixture(scope="module")
def judged_sample():
    return pd.read_json(EAS_DIR / "judged_gpt4o_arc_sample.jsonl", lines=True)


def _numeric(df, cols):
    return df[cols].to_numpy(dtype=float)


# ------------------------------------------------------------------- published reproduction


def test_compat_instance_metrics_reproduce_published_gpt4o_rows(judged_sample, published_instances):
    ours = instance_metrics(judged_sample, compat="eas")
    assert list(ours.columns) == list(published_instances.columns) == INSTANCE_COLUMNS
    assert len(ours) == 88
    ref = (
        published_instances[published_instances.model_name == "gpt-4o"]
        .set_index("id")
        .loc[ours["id"]]
        .reset_index()
    )
    num = [c for c in INSTANCE_COLUMNS[5:] if c not in ("stab_sem", "trizone")]
    # bit-for-bit, not just close
    np.testing.assert_array_equal(_numeric(ours, num), _numeric(ref, num))
    assert (
        ours[["dataset", "model_name", "task_type", "gold_answer"]].values
        == ref[["dataset", "model_name", "task_type", "gold_answer"]].values
    ).all()
    # zones: pooled thresholds of the whole published table reproduce its zones
    th = thresholds(published_instances.sens_heuristic, published_instances.sens_judge)
    pooled = instance_metrics(judged_sample, compat="eas", thresholds_hj=th)
    assert (pooled["trizone"].values == ref["trizone"].values).all()


def test_default_scorers_differ_from_published_only_on_numeric_labels(judged_sample):
    rows = judged_sample.copy()
    ours = instance_metrics(rows)
    compat = instance_metrics(rows, compat="eas")
    differ = ours.loc[ours.mean_heuristic != compat.mean_heuristic, "id"].tolist()
    numeric_ids = rows.loc[rows.options.map(lambda o: o[0].startswith("1)")), "id"].unique()
    assert set(differ) <= set(numeric_ids) and differ
    # the judge side does not depend on the scorer
    np.testing.assert_array_equal(ours.sens_judge, compat.sens_judge)


def test_compat_aggregate_of_published_instances(published_instances):
    agg = aggregate(published_instances, compat="eas")
    assert list(agg.columns) == DATASET_COLUMNS
    assert len(agg) == 27
    assert agg[KEY_COLS].apply(tuple, axis=1).is_monotonic_increasing  # sorted groups
    assert (agg.n_items == 200).all()
    zone_cols = ["n_artifact", "n_genuine", "n_underdetected", "n_stable"]
    assert (agg[zone_cols].sum(axis=1) == agg.n_items).all()
    assert agg.stab_sem_mean.isna().all()
    # zone counts equal the published zone column (same pooled table)
    pub_counts = published_instances.groupby(KEY_COLS)["trizone"].value_counts().unstack(0 - 1)
    for z in ("artifact", "genuine", "underdetected", "stable"):
        np.testing.assert_array_equal(agg[f"n_{z}"], pub_counts[z].fillna(0).to_numpy())
    # bootstrap rule: fresh default_rng(42) per (group, metric), 1000 rng.choice means
    first = published_instances.groupby(KEY_COLS, sort=True).get_group(tuple(agg.loc[0, KEY_COLS]))
    rng = np.random.default_rng(42)
    v = first["eas"].to_numpy()
    boot = [rng.choice(v, len(v), replace=True).mean() for _ in range(1000)]
    assert agg.loc[0, "eas_ci_lo"] == np.percentile(boot, (1 - 0.95) / 2 * 100)
    assert agg.loc[0, "eas_ci_lo"] == pytest.approx(np.percentile(boot, 2.5), abs=1e-12)
    assert agg.loc[0, "eas_ci_hi"] == np.percentile(boot, 97.5)
    assert agg.loc[0, "eas_std"] == pytest.approx(first["eas"].std(ddof=1), rel=1e-14)


def test_compat_aggregate_equals_published_dataset_table(published_instances):
    pub = pd.read_csv(EAS_DIR / "metrics_dataset.csv")
    agg = aggregate(published_instances, compat="eas")
    assert list(agg.columns) == list(pub.columns)
    assert (agg[KEY_COLS].values == pub[KEY_COLS].values).all()
    num = [c for c in pub.columns if c not in KEY_COLS]
    np.testing.assert_allclose(_numeric(agg, num), _numeric(pub, num), rtol=0, atol=1e-9)


def test_aggregate_recomputes_zones_from_the_table_it_is_given(published_instances):
    sub = published_instances[published_instances.dataset == "boolq"].sample(frac=1, random_state=0)
    agg = aggregate(sub, compat="eas")
    th = sub.sens_heuristic.quantile(0.75), sub.sens_judge.quantile(0.75)
    z = zones(sub.sens_heuristic, sub.sens_judge, thresholds_hj=th)
    expect = z.groupby(sub.model_name.values).apply(lambda s: (s == "genuine").sum())
    np.testing.assert_array_equal(agg.n_genuine, expect.sort_index().to_numpy())
    assert len(agg) == 9 and (agg.dataset == "boolq").all()


# --------------------------------------------------------------------------- rules, edge cases


def test_bootstrap_vectorised_equals_sequential_choice():
    for n in (1, 2, 7, 13, 200, 201):
        v = np.random.default_rng(n).random(n)
        rng = np.random.default_rng(42)
        boot = [rng.choice(v, n, replace=True).mean() for _ in range(1000)]
        lo, hi = bootstrap_ci(v, compat="eas")
        assert (lo, hi) == (np.percentile(boot, (1 - 0.95) / 2 * 100), np.percentile(boot, 97.5))


def test_bootstrap_nan_handling():
    v = np.array([0.1, np.nan, 0.3, 0.2])
    assert all(np.isnan(bootstrap_ci(v, compat="eas")))  # published: NaN propagates
    lo, hi = bootstrap_ci(v)
    assert 0.1 <= lo <= hi <= 0.3


def test_zones_strictly_greater_and_pooled():
    sh = pd.Series([0.0, 0.0, 0.0, 0.5, 0.5])
    sj = pd.Series([0.0, 0.5, 0.0, 0.0, 0.5])
    # 75th percentiles are 0.5 and 0.5: nothing is strictly above
    assert zones(sh, sj).tolist() == ["stable"] * 5
    z = zones(sh, sj, thresholds_hj=(0.1, 0.1))
    assert z.tolist() == ["stable", "underdetected", "stable", "artifact", "genuine"]


def _rows(h_resp, j, task="boolean", gold="yes", iid="x"):
    recs = []
    for tid, resp, jc in zip(EAS_TEMPLATE_IDS, h_resp, j, strict=True):
        recs.append(
            {
                "id": iid,
                "dataset": "boolq",
                "model_name": "m",
                "task_type": task,
                "gold_answer": gold,
                "template_id": tid,
                **eas_factors(tid),
                "raw_response": resp,
                "judge_correct": jc,
            }
        )
    return recs


def test_instance_metrics_formulae_and_failures():
    # heuristic: correct only when fmt=1 (templates T?1?); judge always correct
    resp = ["maybe", "maybe", "yes", "yes", "maybe", "maybe", "yes", "yes"]
    rows = pd.DataFrame(_rows(resp, [True] * 8))
    out = instance_metrics(rows)
    r = out.iloc[0]
    assert r.sens_heuristic == 0.5 and r.sens_judge == 0.0  # population std of 4 ones, 4 zeros
    assert r.eas == 0.5 and r.signed_eas == 0.5
    assert r.effect_fmt_heuristic == 1.0 and r.effect_role_heuristic == 0.0
    assert r.mean_heuristic == 0.5 and r.mean_judge == 1.0 and r.n_templates == 8
    # a failed call and a failed judge call are excluded by default, not scored as wrong
    resp2 = [None, *resp[1:]]
    j2 = [True] * 7 + [None]
    out = instance_metrics(pd.DataFrame(_rows(resp2, j2)))
    r = out.iloc[0]
    h = np.array([0, 1, 1, 0, 0, 1, 1], float)
    assert r.sens_heuristic == pytest.approx(h.std()) and r.mean_heuristic == pytest.approx(4 / 7)
    assert r.sens_judge == 0.0 and r.mean_judge == 1.0
    # compat: the failed response is an empty answer (wrong), as published
    rc = instance_metrics(pd.DataFrame(_rows(resp2, j2)), compat="eas").iloc[0]
    assert rc.mean_heuristic == pytest.approx(4 / 8)


def test_instance_metrics_single_template_and_empty_factor_side():
    rows = pd.DataFrame(_rows(["yes"] * 8, [True] * 8))[:1]
    d = instance_metrics(rows).iloc[0]
    c = instance_metrics(rows, compat="eas").iloc[0]
    assert np.isnan(d.sens_heuristic) and c.sens_heuristic == 0.0
    assert np.isnan(d.effect_role_heuristic) and c.effect_role_heuristic == 0.0
    assert d.trizone is None and c.trizone == "stable"


def test_instance_metrics_order_independent_and_validates():
    rows = pd.DataFrame(
        _rows(["yes", "no"] * 4, [True, False] * 4, iid="b")
        + _rows(["no"] * 8, [False] * 8, iid="a")
    )
    a = instance_metrics(rows)
    b = instance_metrics(rows.sample(frac=1, random_state=3))
    pd.testing.assert_frame_equal(a, b)
    assert a.id.tolist() == ["a", "b"]
    with pytest.raises(ValueError, match="lack the columns \\['judge_correct'\\]"):
        instance_metrics(rows.drop(columns="judge_correct"))
    with pytest.raises(ValueError, match="role has values \\[2\\]"):
        instance_metrics(rows.assign(role=2))


def test_instance_detail_per_template():
    resp = ["maybe", None, "yes", "yes", "maybe", "maybe", "yes", "no"]
    judge = [True, True, True, None, False, True, True, True]
    rows = pd.DataFrame(_rows(resp, judge) + _rows(["no"] * 8, [False] * 8, iid="other"))
    rows = rows.sample(frac=1, random_state=1)
    keys = instance_key(rows)
    assert keys.name == "key" and set(keys) == {"m|boolq|x", "m|boolq|other"}
    assert instance_key(rows[["raw_response"]]).tolist() == [str(i) for i in range(16)]
    d = instance_detail(rows, "m|boolq|x")
    assert d.template_id.tolist() == list(EAS_TEMPLATE_IDS)
    assert d.heuristic.tolist()[2:4] == [1.0, 1.0] and d.heuristic.iloc[0] == 0.0
    assert np.isnan(d.judge.iloc[3]) and d.judge.iloc[4] == 0.0
    assert pd.isna(d.raw_response.iloc[1])
    inst = instance_metrics(rows).set_index("id").loc["x"]
    assert d.heuristic.mean() == pytest.approx(inst.mean_heuristic)
    empty = instance_detail(rows, "nope")
    assert empty.empty and list(empty.columns) == [
        "template_id",
        "role",
        "fmt",
        "prefix",
        "heuristic",
        "judge",
        "raw_response",
        "judge_raw",
    ]


def test_instance_detail_html_escapes_the_data():
    rows = pd.DataFrame(_rows([HOSTILE] * 8, [True] * 8, iid=HOSTILE))
    rows["template_id"] = [HOSTILE, *EAS_TEMPLATE_IDS[1:]]
    rows["judge_raw"] = HOSTILE
    key = instance_key(rows).iloc[0]
    metrics = instance_metrics(rows).iloc[0].copy()
    metrics["zone"] = HOSTILE
    out = instance_detail_html(metrics, instance_detail(rows, key))
    assert "<script>" not in out and out.count("&lt;script&gt;alert(1)") >= 4
    assert "<i>failed</i>" in instance_detail_html(
        None, instance_detail(pd.DataFrame(_rows([None] * 8, [True] * 8)), "m|boolq|x")
    )
    assert "Click an instance" in instance_detail_html(None, instance_detail(rows, "nope"))
    assert "Pass the judged rows" in instance_detail_html(metrics, instance_detail(rows, "nope"))


def test_factor_effects_summary(published_instances):
    fe = factor_effects(published_instances, n_boot=200)
    assert len(fe) == 9 * 3
    g = published_instances[published_instances.model_name == "gpt-4o"]
    row = fe[(fe.model_name == "gpt-4o") & (fe.factor == "fmt")].iloc[0]
    assert row.effect_heuristic == pytest.approx(g.effect_fmt_heuristic.mean())
    assert row.effect_diff == pytest.approx(row.effect_heuristic - row.effect_judge)
    assert row.heuristic_ci_lo <= row.effect_heuristic <= row.heuristic_ci_hi


def test_default_aggregate_skips_nan_instances():
    inst = pd.DataFrame(
        {
            "id": list("abcd"),
            "dataset": "d",
            "model_name": "m",
            "task_type": "mcq",
            "sens_heuristic": [0.1, 0.2, np.nan, 0.4],
            "sens_judge": [0.0, 0.3, 0.1, 0.2],
            "eas": [0.1, 0.1, np.nan, 0.2],
            "mean_heuristic": 0.5,
            "mean_judge": 0.5,
        }
    )
    agg = aggregate(inst)
    assert agg.loc[0, "eas_mean"] == pytest.approx(0.4 / 3)
    assert np.isfinite(agg.loc[0, "eas_ci_lo"])
    assert agg.loc[0, "n_items"] == 4
    assert agg.loc[0, ["n_artifact", "n_genuine", "n_underdetected", "n_stable"]].sum() == 3


# ---------------------------------------------------------------------------------- templates


def test_eas_templates_reproduce_published_arc_prompts(judged_sample):
    for _, r in judged_sample.iterrows():
        ours = render_variant(r.to_dict(), r.template_id)
        if r.options[0].startswith("A)"):
            assert ours == r.prompt
        else:  # published prompts tell numeric-label items to answer with a letter
            assert ours == r.prompt.replace(
                "letter of the correct option (A, B, C, or D)",
                "number of the correct option (1, 2, 3, or 4)",
            )


def test_eas_factorial_for_each_task():
    arc3 = Item("a", "Q?", (("A", "x"), ("B", "y"), ("C", "z")), "B")
    arc5 = Item("a5", "Q?", tuple((c, c.lower()) for c in "ABCDE"), "E")
    boolq = Item("b", "is it", passage="Some passage.", answer="yes")
    squad = Item("s", "Who?", context="Some context.", answer="Bob")
    for tid in EAS_TEMPLATE_IDS:
        f = eas_factors(tid)
        for it in (arc3, arc5, boolq, squad):
            text = render_variant(it, tid)
            assert text.startswith("You are a careful") == bool(f["role"])
            assert text.rstrip().endswith("Answer:") == bool(f["prefix"])
            assert ("Respond with only" in text) == bool(f["fmt"])
    assert "(A, B, or C)" in render_variant(arc3, "T010")
    assert "(A, B, C, D, or E)" in render_variant(arc5, "T010")
    assert "yes or no" in render_variant(boolq, "T010")
    assert "Passage: Some passage.\nQuestion: is it?" in render_variant(boolq, "T000")
    assert "Context: Some context." in render_variant(squad, "T000")
    assert len(set(EAS_TEMPLATE_IDS)) == 8


def test_prosa_variants_use_item_labels_and_share_shots():
    csqa = Item(
        "c",
        "Where is milk kept?",
        tuple(zip("ABCDE", "fridge oven car bed desk".split(), strict=True)),
        "A",
    )
    assert sum(len(v) for v in PROSA_STYLES.values()) == len(PROSA_TEMPLATE_IDS) == 12
    texts = [render_variant(csqa, t) for t in PROSA_TEMPLATE_IDS]
    assert len(set(texts)) == 12
    for t in texts:
        assert "E. desk" in t
        assert "A, B, C or D" not in t and "A, B, C, or D" not in t
    assert "A, B, C, D or E" in render_variant(csqa, "P10")
    arc_num = Item("n", "Q", (("1", "a"), ("2", "b"), ("3", "c"), ("4", "d")), "2")
    assert "number" in render_variant(arc_num, "P11") and "1, 2, 3 or 4" in render_variant(
        arc_num, "P11"
    )
    math_item = Item("m", "1+1?", answer="2", task_type="math")
    code_item = Item(
        "h", "def f(x):\n    '''Return x+1.'''\n", answer="return x+1", task_type="code"
    )
    assert "\\boxed" in render_variant(math_item, "P10")
    assert render_variant(code_item, "P01").startswith("def f(x)")
    shots = [Item(f"s{i}", f"Shot question {i}?", csqa.options, "B") for i in range(7)]
    prompts = {k: render_variant(csqa, "P04", shots, k=k) for k in SHOT_COUNTS}
    for k in SHOT_COUNTS:
        assert prompts[k].count("Shot question") == k
    assert prompts[3].split("Question: Where")[0] in prompts[7]  # first k shared
    with pytest.raises(ValueError, match="only 7 shots"):
        render_variant(csqa, "P01", shots, k=8)
    with pytest.raises(ValueError, match="not known"):
        render_variant(csqa, "X01")


def test_build_rows_has_published_columns():
    items = [{"id": "q1", "question": "Q?", "options": [("A", "x"), ("B", "y")], "answer": "B"}]
    rows = build_rows(items, dataset="arc_challenge", model_name="m")
    assert len(rows) == 8 and rows.template_id.tolist() == list(EAS_TEMPLATE_IDS)
    assert rows.options[0] == ["A) x", "B) y"] and rows.gold_answer[0] == "B"
    assert {"role", "fmt", "prefix", "prompt", "task_type"} <= set(rows.columns)


# ------------------------------------------------------------------------------------- charts


def test_eas_charts(published_instances):
    pytest.importorskip("altair")
    from psens.eas import charts as po

    inst = published_instances[published_instances.dataset == "arc_challenge"]
    agg = aggregate(inst, compat="eas", n_boot=50)
    charts = {
        "scatter": (po.zones_scatter(inst), len(inst)),
        "zones": (po.zone_counts(inst), inst.groupby(["model_name", "trizone"]).ngroups),
        "effects": (po.factor_effects_bars(factor_effects(inst)), 9 * 3 * 2),
        "eas_ci": (po.eas_by_task(agg), 9),
        "signed": (po.signed_eas(inst), 9),
    }
    for name, (chart, n) in charts.items():
        assert len(chart.data) == n, name
        chart.to_dict()
    scatter = charts["scatter"][0].data
    th = thresholds(inst.sens_heuristic, inst.sens_judge)
    assert (scatter.th_h == th[0]).all() and set(scatter.zone) <= {
        "artifact",
        "genuine",
        "underdetected",
        "stable",
    }


def test_psens_core_imports_without_altair():
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['altair'] = None\n"
        "import psens.eas, psens.pss, psens.eas.scoring, psens.eas.charts, psens.backends\n"
        "print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


def test_published_judged_rows_roundtrip_json(tmp_path):
    rows = pd.DataFrame(_rows(["yes"] * 8, [True] * 8))
    p = tmp_path / "j.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in rows.to_dict("records")))
    back = pd.read_json(p, lines=True)
    pd.testing.assert_frame_equal(instance_metrics(back), instance_metrics(rows))


def test_to_dataset_feeds_pss(judged_sample):
    from psens.pss import pss

    ds = to_dataset(judged_sample)
    assert dict(ds.sizes) == {"model": 1, "sample": 88, "template": 8}
    assert ds.role.values.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    inst = instance_metrics(judged_sample).set_index("id")
    np.testing.assert_allclose(
        ds.heuristic.mean("template").sel(model="gpt-4o").values,
        inst.loc[ds.sample.values, "mean_heuristic"].values,
    )
    p = pss(ds.judge)
    assert p.dims == ("model",) and 0 < float(p[0]) < 1


def test_template_items_from_dataset_layer_items():
    from types import SimpleNamespace

    boolq = SimpleNamespace(
        id="b",
        question="is it",
        options=(("A", "yes"), ("B", "no")),
        answer="B",
        context="Passage.",
        metadata={},
    )
    squad = SimpleNamespace(
        id="s",
        question="Who?",
        options=(),
        answer="Bob",
        context="Bob did.",
        metadata={"answers": ["Bob", "Bobby"]},
    )
    b = render_variant(boolq, "T010")
    assert "Passage: Passage." in b and "yes or no" in b
    rows = build_rows([boolq, squad], dataset="mixed", model_name="m")
    assert rows.drop_duplicates("id").task_type.tolist() == ["boolean", "open_ended"]
    assert rows.drop_duplicates("id").gold_answer.tolist() == ["no", "Bob"]
    assert rows.all_gold_answers.iloc[-1] == ["Bob", "Bobby"]


def test_one_item_class_for_loaders_and_templates(tmp_path):
    from psens import datasets, variants
    from psens.variants import as_item, task_kind

    assert variants.Item is datasets.Item
    rows = [{"question": "is the sky blue", "answer": False, "passage": "The sky is grey."}]
    path = tmp_path / "b.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (loaded,) = datasets.load("boolq", path=path)
    assert task_kind(loaded) == "boolean"  # the loader's yes/no options become a yes/no item
    it = as_item(loaded)
    assert isinstance(it, datasets.Item) and it.dataset == "boolq"
    assert (it.passage, it.answer, it.options, it.task_type) == (
        "The sky is grey.",
        "no",
        (),
        "boolean",
    )
    assert as_item(it) is it  # template-ready items pass through
    forced = Item("b", "is it", loaded.options, "B", context="P.", task_type="mcq")
    assert task_kind(forced) == "mcq" and "letter of the correct option (A or B)" in (
        render_variant(forced, "T010")
    )
    d = as_item({"id": "q", "question": "Q?", "options": ["A) x", "B) y"], "dataset": "arc"})
    assert d.options == (("A", "x"), ("B", "y")) and d.dataset == "arc" and d.answer == ""
    nan = as_item({"id": "q", "question": "Q?", "options": ["A) x"], "passage": float("nan")})
    assert nan.passage == "" and nan.task_type == "mcq"
    with pytest.raises(ValueError, match="task_type 'essay'"):
        task_kind(Item("e", "Q", task_type="essay"))
    with pytest.raises(ValueError, match="no answer"):
        render_variant(it, "T000", [Item("s", "Q?", passage="P.")])
