"""psens.widgets without a browser: set traits / control values, assert on chart data.

A selection coming back from the browser is faked by setting ``jchart._vl_selections``
(the synced trait the JavaScript side writes).
"""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("altair")

import psens.widgets as W
from psens.ips import aggregate, class_shares, interaction_classes, ips, normalize
from psens.synthetic import synthetic_run


@pytest.fixture(scope="module")
def run():
    ds = synthetic_run(n_samples=6, seed=1)
    words = np.array(ds["word"].values)
    words[0, :4] = ["NOT", "lay", "eggs", "dogs"]
    return ds.assign_coords(word=(("sample", "var"), words))


def _spec_values(w) -> list[dict]:
    spec = w.jchart.spec
    values = []
    for data in spec.get("datasets", {}).values():
        values += data
    return values


def _pick(w, models):
    points = [{"model": m} for m in models]
    w.jchart._vl_selections = {"pick": {"value": {"vlPoint": {"or": points}}, "store": []}}


def test_public_api_is_explicit():
    assert sorted(W.__all__) == sorted(set(W.__all__))
    for name in W.__all__:
        assert hasattr(W, name), name


def test_chart_builders_import_no_ui():
    src = W.charts.__file__
    with open(src) as fh:
        assert "ipywidgets" not in fh.read()


def test_offline_bundle_is_used(run):
    w = W.OrderIPS(run)
    assert "esm.sh" not in w.jchart._esm  # Vega comes from vl-convert, not a CDN
    assert w.jchart.embed_options["renderer"] == "svg"


def test_subset_labels_are_the_words_of_s():
    assert W.subset_label(0b0110, ["NOT", "lay", "eggs", "dogs"], "AND") == "AND {lay, eggs}"
    assert W.subset_words(0b1001, ["NOT", "lay", "eggs", "dogs"]) == ["NOT", "dogs"]


# ----------------------------------------------------------------------------- OrderIPS


def test_order_ips_matches_the_metric(run):
    w = W.OrderIPS(run, tau=0.1)
    t = w.tables["ips"].set_index(["model", "order"])
    for m, model in enumerate(run["model"].values):
        one = run.isel(model=m)
        for kind in ("all", "low", "high"):
            per = ips(one, tau=0.1, order=None if kind == "all" else kind)
            expected = float(aggregate(per).values)
            assert t.loc[(model, kind), "ips"] == pytest.approx(expected, nan_ok=True)
            assert t.loc[(model, kind), "n_skipped"] == int(per.isnull().sum())


def test_order_ips_slider_updates_the_same_chart(run):
    w = W.OrderIPS(run)
    jchart, before = w.jchart, json.dumps(w.jchart.spec, sort_keys=True)
    w.controls["tau"].value = 0.3
    assert w.tau == 0.3
    assert w.jchart is jchart  # updated in place, never re-created
    assert json.dumps(w.jchart.spec, sort_keys=True) != before
    assert "τ = 0.30" in json.dumps(w.jchart.spec["title"], ensure_ascii=False)
    w.tau = 0.1  # and back: the control follows the trait
    assert w.controls["tau"].value == 0.1


def test_order_ips_models_types_subset_layout(run):
    w = W.OrderIPS(run)
    w.controls["models"].value = ("toy-7b", "toy-14b-instruct")
    assert {r["model"] for r in _spec_values(w)} == {"toy-7b", "toy-14b-instruct"}
    w.types = ["high"]
    assert {r["order"] for r in _spec_values(w)} == {"high"}
    row = w.tables["ips"].iloc[0]
    n_all = row["n_used"] + row["n_skipped"]
    w.controls["subset"].value = "n_vars=4"
    row = w.tables["ips"].iloc[0]
    n_sub = row["n_used"] + row["n_skipped"]
    assert n_sub == int((run["n_vars"] == 4).sum()) < n_all
    w.layout = "by_order"
    assert w.jchart.spec["encoding"]["column"]["field"] == "order"
    with pytest.raises(ValueError, match="tau"):
        w.tau = 1.5
    with pytest.raises(ValueError, match="unknown models"):
        w.models = ["gpt-nope"]


def test_order_ips_shot_runs():
    ds = synthetic_run(n_samples=3, shots=[0, 1, 3])
    w = W.OrderIPS(ds)
    assert w.shot == 0 and "shot" in w.controls
    first = w.tables["ips"]["ips"].to_numpy()
    w.controls["shot"].value = 3
    assert not np.allclose(first, w.tables["ips"]["ips"].to_numpy(), equal_nan=True)


def test_on_select_and_remove(run):
    w = W.OrderIPS(run)
    got = []
    w.on_select(got.append)
    _pick(w, ["toy-7b"])
    assert got == [["toy-7b"]] and w.selected == ["toy-7b"]
    w.on_select(got.append, remove=True)
    _pick(w, ["toy-7b-instruct"])
    assert got == [["toy-7b"]] and w.selected == ["toy-7b-instruct"]
    w.tau = 0.2  # a new chart drops the pick, and picks keep arriving afterwards
    assert w.selected == []
    _pick(w, ["toy-moe-instruct"])
    assert w.selected == ["toy-moe-instruct"]


def test_link_models_drives_other_views(run):
    source, classes = W.OrderIPS(run), W.InteractionClasses(run)
    case = W.CaseStudy(run)
    W.link_models(source, classes, case)
    _pick(source, ["toy-14b-instruct", "toy-7b"])
    assert classes.models == ["toy-14b-instruct", "toy-7b"]
    assert set(classes.tables["classes"]["model"]) == {"toy-14b-instruct", "toy-7b"}
    assert case.model == "toy-14b-instruct"
    _pick(source, [])
    assert classes.models == classes.model_names


# ----------------------------------------------------------------------------- classes


def test_interaction_classes_match_the_metric(run):
    w = W.InteractionClasses(run, pair=2, tau=0.15)
    a = run["I_and"].isel(model=1).transpose("sample", "template", "subset").values
    o = run["I_or"].isel(model=1).transpose("sample", "template", "subset").values
    pred = run["prediction"].isel(model=1).values.astype(str)
    res = interaction_classes(a, o, 0.15, predictions=pred)
    shares = class_shares(res["counts"][:, 2:3], res["changed"][:, 2:3])
    t = w.tables["classes"]
    got = t[(t.model == "toy-7b-instruct") & (t.group == "unchanged")]["share"].to_numpy()
    np.testing.assert_allclose(got, shares["unchanged"])
    for _, rows in t.groupby(["model", "group"]):
        if rows["count"].sum():
            assert rows["share"].sum() == pytest.approx(1.0)


def test_interaction_classes_controls(run):
    w = W.InteractionClasses(run)
    labels = [label for label, _ in w.controls["pair"].options]
    assert labels[0] == "all pairs" and "ips1|ips2" in labels
    pooled = w.tables["classes"]["count"].sum()
    w.controls["pair"].value = 0
    assert w.tables["classes"]["count"].sum() < pooled
    assert "ips1|ips2" in json.dumps(w.jchart.spec["title"])
    w.controls["order"].value = "low"
    assert w.order == "low"
    assert "low-order" in json.dumps(w.jchart.spec["title"])


def test_pair_dropdown_shows_its_value(run):
    """ "all pairs" is a value the dropdown displays (a None value showed a blank box)."""
    w = W.InteractionClasses(run)
    box = w.controls["pair"]
    assert w.pair is None and box.index == 0 and box.label == "all pairs"
    w.pair = 2
    assert box.label == "ips1|ips4" and box.value == 2
    w.pair = None
    assert box.label == "all pairs" and box.index == 0
    box.value = 1  # the control drives the trait both ways
    assert w.pair == 1
    box.label = "all pairs"
    assert w.pair is None and w.tables["classes"]["count"].sum() > 0
    w.pair = "ips2-ips1"  # a pair by name is stored as its index
    assert w.pair == 0 and box.label == "ips1|ips2"
    assert W.InteractionClasses(run, pair="ips5|ips4").controls["pair"].label == "ips4|ips5"
    with pytest.raises(ValueError, match="no template pair"):
        w.pair = "ips1-ips9"


def test_choice_controls_show_long_model_names_in_full(run):
    """Model dropdowns and lists are as wide as their longest name needs."""
    long = "meta-llama/Llama-3.1-8B-Instruct-with-a-long-suffix"
    ds = run.assign_coords(model=[long, *[str(m) for m in run["model"].values[1:]]])

    def px(control):
        return float(control.layout.width.removesuffix("px"))

    case = W.CaseStudy(ds, model=long)
    need = 7 * (len(long) + len("model"))  # at least 7 px per character of a 13 px font
    assert px(case.controls["model"]) >= need
    assert px(W.Sparsity(ds).controls["model"]) >= need
    assert px(W.OrderIPS(ds).controls["models"]) >= 7 * (len(long) + len("models"))
    assert px(case.controls["tau"]) == 260  # sliders keep their width
    assert px(case.controls["template_a"]) == 220  # short options: the compact width


# ----------------------------------------------------------------------------- case study


def test_case_study_labels_and_values(run):
    w = W.CaseStudy(run, model="toy-7b", sample="s000", top_k=50, tau=0.05)
    t = w.tables["case"]
    assert (t.groupby("label").size() == 2).all()  # one bar per template
    words = ["NOT", "lay", "eggs", "dogs"]
    for _, row in t.iterrows():
        assert row["label"] == W.subset_label(row["mask"], words, row["kind"])
    one = run.sel(model="toy-7b", sample="s000")
    n = int(one["n_vars"])
    na, no = normalize(one["I_and"].values[:, : 1 << n], one["I_or"].values[:, : 1 << n])
    row = t.iloc[0]
    src = na if row["kind"] == "AND" else no
    assert row["value"] == pytest.approx(src[0, row["mask"]])
    assert (t.drop_duplicates("label")["rank"].diff().dropna() > 0).all()


def test_case_study_controls_update_subtitle(run):
    w = W.CaseStudy(run)
    w.controls["top_k"].value = 2
    assert w.tables["case"]["label"].nunique() <= 2
    w.controls["template_b"].value = "ips5"
    subtitle = json.dumps(w.jchart.spec["title"]["subtitle"], ensure_ascii=False)
    pred = run["prediction"].sel(model=w.model, sample=w.sample, template="ips5").item()
    assert f"T̂ = ips5: prediction {pred}" in subtitle
    w.controls["template_b"].value = w.template_a
    assert w.tables["case"] is None  # a helpful empty chart, no error
    with pytest.raises(ValueError, match="not in the run"):
        w.sample = "nope"


# ----------------------------------------------------------------------------- factors


def test_factor_compare_relative_change(run):
    w = W.FactorCompare(run, by="kind")
    assert (w.a, w.b) == (["instruct"], ["base"])
    order = W.OrderIPS(run, types=["all", "low", "mid", "high"]).tables["ips"]
    for kind in ("all", "low", "mid", "high"):
        rows = order[order.order == kind].set_index("model")["ips"]
        ia = rows[["toy-7b-instruct", "toy-14b-instruct", "toy-moe-instruct"]].mean()
        ib = rows["toy-7b"]
        got = w.tables["delta"].set_index("order").loc[kind, "rel_change"]
        assert got == pytest.approx((ia - ib) / ib)


def test_factor_compare_switch_factor_and_pairing(run):
    w = W.FactorCompare(run)
    jchart = w.jchart
    w.controls["by"].value = "arch"
    assert (w.a, w.b) == (["dense"], ["moe"])
    assert [v for _, v in w.controls["a"].options] == ["dense", "moe"]
    assert {g[:2] for g in w.tables["groups"]["group"]} == {"A:", "B:"}
    w.match = "family"  # all three dense toys pair with the one MoE toy
    assert w.tables["delta"]["n_pairs"].max() == 3
    assert w.jchart is jchart
    with pytest.raises(ValueError, match="match"):
        w.match = "colour"


def test_factor_compare_shots():
    ds = synthetic_run(n_samples=3, shots=[0, 1, 2])
    w = W.FactorCompare(ds, by="shot")
    assert (w.a, w.b) == ([1, 2], [0])
    delta = w.tables["delta"].set_index("order")
    assert delta.loc["all", "n_pairs"] == ds.sizes["model"]
    assert delta.loc["all", "rel_change"] < 0  # synthetic instability shrinks with shots


# ----------------------------------------------------------------------------- sparsity


def test_sparsity_curves_and_matching(run):
    w = W.Sparsity(run, fraction=1.0)
    assert w.tables["matching"]["error"].max() < 1e-9  # all interactions: theorem 3.1
    curve = w.tables["curve"]
    for _, rows in curve.groupby("model"):
        assert (np.diff(rows["strength"].to_numpy()) <= 1e-12).all()
        assert rows["strength"].iloc[0] == pytest.approx(1.0)
    w.controls["fraction"].value = 0.05
    assert w.tables["matching"]["error"].max() > 0
    errors = w.tables["errors"]
    last = errors[errors.fraction == 1.0]["error"]
    assert (last < 1e-9).all()
    w.controls["models"].value = ("toy-7b",)
    assert set(w.tables["curve"]["model"]) == {"toy-7b"}


# ----------------------------------------------------------------------------- runs


def test_widgets_on_a_stored_run(tmp_path, monkeypatch):
    from psens.store import save

    ds = synthetic_run(n_samples=3)
    save(ds, tmp_path / "run.zarr")
    monkeypatch.setenv("PSENS_RUN", str(tmp_path / "run.zarr"))
    stored = W.load_run()
    w = W.OrderIPS(stored)
    direct = W.OrderIPS(ds)
    np.testing.assert_allclose(
        w.tables["ips"]["ips"].to_numpy(), direct.tables["ips"]["ips"].to_numpy()
    )
    assert W.CaseStudy(stored).tables["case"] is not None


def test_load_run_sizes(monkeypatch):
    monkeypatch.delenv("PSENS_RUN", raising=False)
    monkeypatch.setenv("PSENS_SIZE", "tiny")
    ds = W.load_run(tiny={"n_samples": 2})
    assert ds.sizes["sample"] == 2
    with pytest.raises(ValueError, match="PSENS_SIZE"):
        W.load_run(size="huge")
    with pytest.raises(ValueError, match="config"):
        W.load_run(size="full")


def test_widgets_refuse_a_non_run():
    with pytest.raises(TypeError, match="psens run Dataset"):
        W.OrderIPS({"I_and": 1})


def test_widget_displays_its_ui(run):
    w = W.Sparsity(run)
    bundle = w._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == w.ui.model_id


def test_pending_blocks_are_skipped_not_fatal():
    ds = synthetic_run(n_samples=3)
    for name in ("v", "I_and", "I_or"):
        ds[name].values[1, 0] = np.nan
    ds["prediction"].values[1, 0] = ""
    w = W.OrderIPS(ds)
    row = w.tables["ips"].query("model == 'toy-7b-instruct' and order == 'all'").iloc[0]
    assert row["n_used"] + row["n_skipped"] == 3 and row["n_skipped"] >= 1
    case = W.CaseStudy(ds, model="toy-7b-instruct", sample="s000")
    assert case.tables["case"].empty and "pending" in case.status.value


def test_chart_builders_are_pure(run):
    table = W.OrderIPS(run).tables["ips"]
    copy = table.copy()
    one = W.charts.order_ips_chart(table).to_dict()
    two = W.charts.order_ips_chart(table).to_dict()
    assert one == two
    assert table.equals(copy)  # the input is not modified


def test_load_run_opens_the_shipped_run_by_default(tmp_path, monkeypatch):
    from psens.store import to_netcdf

    notebook = sys.modules["psens.widgets.notebook"]

    monkeypatch.delenv("PSENS_RUN", raising=False)
    monkeypatch.delenv("PSENS_SIZE", raising=False)
    shipped = to_netcdf(synthetic_run(n_samples=2, seed=3), tmp_path / "arc.nc")
    monkeypatch.setattr(notebook, "SHIPPED_RUN", shipped)
    ds = W.load_run()
    assert ds.sizes["sample"] == 2 and ds.attrs["seed"] == 3  # the file, not a new run
    assert W.load_run(shipped=False).sizes["sample"] == 12  # a synthetic run instead
    assert W.load_run(size="tiny").sizes["sample"] == 12
    monkeypatch.setattr(notebook, "SHIPPED_RUN", tmp_path / "absent.nc")
    assert W.load_run().sizes["sample"] == 12  # no shipped run: the synthetic one


def test_load_run_finds_a_relative_path_from_the_checkout(tmp_path, monkeypatch):
    from psens.store import to_netcdf

    notebook = sys.modules["psens.widgets.notebook"]

    monkeypatch.setattr(notebook, "_ROOT", tmp_path)
    (tmp_path / "runs").mkdir()
    to_netcdf(synthetic_run(n_samples=2), tmp_path / "runs" / "x.nc")
    monkeypatch.chdir(tmp_path / "runs")
    assert W.load_run("runs/x.nc").sizes["sample"] == 2


def test_run_helpers_say_what_a_run_lacks_and_what_it_shows():
    ds = synthetic_run(n_samples=3, shots=[0, 1])
    assert W.describe(ds).startswith("synthetic run") and "shots 0/1" in W.describe(ds)
    assert W.lacks(ds, "x", models=2, kinds=("base", "tuned"), archs=("dense", "moe")) == ""
    one = ds.isel(model=[0], shot=0)
    why = W.lacks(one, "the factor", models=2, kinds=("base", "tuned"), shots=True)
    assert why.startswith("this run has 1 model") and "needs ≥ 2 models" in why
    assert "base and tuned models" in why and "0-shot and k-shot" in why
    assert "no hidden-state metrics" in W.lacks(ds.drop_vars("hidden_l2"), "H", hidden=True)
    text = W.paper_vs_run("low < high (fig. 9)", "low 1.6 > high 1.3", False, ds)
    assert text.splitlines() == [
        "The paper reports low < high (fig. 9).",
        "This synthetic run: low 1.6 > high 1.3 — the paper's claim does not hold here.",
    ]
    real = ds.copy()
    real.attrs = {}
    assert W.verdict("x", True, real) == "This run: x — the paper's claim holds here."
    assert W.verdict("x", None) == "This run: x — this run cannot test the claim."
    table = ds["model"].to_series().to_frame()
    assert "synthetic" in W.show(table, ds).caption and W.show(table, real) is table
