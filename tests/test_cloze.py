"""The cloze formulation: its value function (closed form), re-scoring a store without a
model, the config keys and their refusals, cloze format spaces, and a cloze IPS run end to
end on ARC-Easy with a random-weight model."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from psens import cloze, prompts, store
from psens.cloze import cloze_value, option_probs, option_scores, rescore
from psens.config import RunConfig
from psens.settings import run_settings

# ------------------------------------------------------------------ the value function


def _literal_v(ll, tokens, nbytes, answer, norm):
    """log p̃ - log(1 - p̃) with p̃ the softmax over the present options, one row at a time."""
    d = {"sum": np.ones_like(tokens), "token": tokens, "char": nbytes}[norm]
    out = []
    for row in np.atleast_2d(ll):
        present = ~np.isnan(row)
        s = row[present] / d[present]
        p = np.exp(s) / np.exp(s).sum()
        y = int(np.flatnonzero(present).tolist().index(answer))
        out.append(np.log(p[y]) - np.log(1 - p[y]))
    return np.asarray(out)


@pytest.mark.parametrize("norm", cloze.CLOZE_NORMS)
def test_cloze_value_is_the_log_odds_of_the_softmax_over_options(norm):
    rng = np.random.default_rng(0)
    ll = rng.uniform(-30, -2, size=(16, 4))
    ll[:, 3] = np.nan  # an item with three options in a store of four
    tokens = np.asarray([3.0, 5.0, 2.0, 0.0])
    nbytes = np.asarray([9.0, 20.0, 4.0, 0.0])
    for answer in range(3):
        got = cloze_value(ll, tokens, nbytes, answer, norm)
        np.testing.assert_allclose(got, _literal_v(ll, tokens, nbytes, answer, norm), rtol=1e-10)
    p = option_probs(ll, tokens, nbytes, norm)
    np.testing.assert_allclose(p.sum(-1), 1.0)
    assert (p[:, 3] == 0).all()


def test_cloze_value_is_exact_where_a_clamped_probability_would_saturate():
    ll = np.asarray([[-1.0, -60.0, -70.0]])
    v = cloze_value(ll, [1, 1, 1], [1, 1, 1], 0, "sum")
    # s_y - logsumexp(others) = -1 - (-60 + log(1 + e^-10)); p̃ = 1 - 1e-26 in float64
    np.testing.assert_allclose(v, 59.0 - np.log1p(np.exp(-10.0)), rtol=1e-12)


def test_cloze_value_takes_and_gives_xarray():
    rng = np.random.default_rng(1)
    ll = xr.DataArray(rng.normal(size=(2, 5, 3)) - 5, dims=("sample", "subset", "option"))
    tokens = xr.DataArray([[1.0, 2.0, 3.0], [2.0, 2.0, 1.0]], dims=("sample", "option"))
    nbytes = xr.DataArray([[4.0, 7.0, 9.0], [5.0, 3.0, 2.0]], dims=("sample", "option"))
    answer = xr.DataArray([2, 0], dims="sample")
    v = cloze_value(ll, tokens, nbytes, answer, "token")
    assert v.dims == ("sample", "subset")
    for s in range(2):
        ref = _literal_v(ll.values[s], tokens.values[s], nbytes.values[s], int(answer[s]), "token")
        np.testing.assert_allclose(v.values[s], ref, rtol=1e-12)
    with pytest.raises(ValueError, match="cloze_norm = 'bytes' is not known"):
        option_scores(ll, tokens, nbytes, "bytes")


# ------------------------------------------------------------------ re-scoring a store


def _stored_cloze_run(path: Path | None = None):
    """A cloze run's store filled with random log-likelihoods (no model): two samples with
    3 and 4 options, n = 2 and 3, two templates."""
    rng = np.random.default_rng(2)
    options = [["A", "B", "C"], ["A", "B", "C", "D"]]
    ds = store.build(
        models=["m"],
        samples=["s0", "s1"],
        templates=["ips1-cloze", "ips2-cloze"],
        words=[["w0", "w1"], ["w0", "w1", "w2"]],
        prompts=np.asarray([["p", "q"], ["r", "s"]], dtype=object),
        targets=[" a", " b"],
        n_max=3,
        attrs={"answer": "cloze", "cloze_norm": "token"},
        cloze={"labels": options, "bytes": [[3, 8, 5], [4, 4, 9, 2]], "answer": [1, 3]},
    )
    ll = np.full((1, 2, 2, 8, 4), np.nan)
    tokens = np.full((1, 2, 2, 4), np.nan)
    for s, n in enumerate((2, 3)):
        k = len(options[s])
        ll[0, s, :, : 2**n, :k] = rng.uniform(-20, -1, size=(2, 2**n, k))
        tokens[0, s, :, :k] = rng.integers(1, 6, size=(2, k))
    ds["option_loglik"][:] = ll
    ds["option_tokens"][:] = tokens
    v = np.full((1, 2, 2, 8), np.nan)
    for s, n in enumerate((2, 3)):
        v[0, s, :, : 2**n] = 0.0
    ds["v"][:] = v
    return ds


@pytest.mark.parametrize("norm", cloze.CLOZE_NORMS)
def test_rescore_from_the_store_without_a_model(norm):
    ds = _stored_cloze_run()
    out = rescore(ds, norm)
    ll, tok = ds["option_loglik"].values, ds["option_tokens"].values
    nbytes, answer = ds["option_bytes"].values, ds["answer_option"].values
    labels = ds["option_label"].values
    hits = []
    for s, n in enumerate((2, 3)):
        for t in range(2):
            rows = ll[0, s, t, : 2**n]
            ref = _literal_v(rows, tok[0, s, t], nbytes[s].astype(float), int(answer[s]), norm)
            np.testing.assert_allclose(out["v"].values[0, s, t, : 2**n], ref, rtol=1e-12)
            assert np.isnan(out["v"].values[0, s, t, 2**n :]).all()
            d = {"sum": np.ones(4), "token": tok[0, s, t], "char": nbytes[s].astype(float)}[norm]
            best = int(np.nanargmax(rows[-1] / d))
            assert out["prediction"].values[0, s, t] == labels[s, best]
            assert out["correct"].values[0, s, t] == float(best == answer[s])
            hits.append(best == answer[s])
    np.testing.assert_allclose(out["accuracy"].values, [np.mean(hits)])
    assert out.attrs["cloze_norm"] == norm
    assert rescore(ds).attrs["cloze_norm"] == "token"  # the run's own


def test_rescore_survives_the_store_round_trip(tmp_path):
    ds = _stored_cloze_run()
    store.save(ds, tmp_path / "r.zarr")
    back = store.open_run(tmp_path / "r.zarr")
    for norm in cloze.CLOZE_NORMS:
        a, b = rescore(ds, norm), rescore(back, norm)
        np.testing.assert_allclose(a["v"].values, b["v"].values, equal_nan=True)
        np.testing.assert_array_equal(a["prediction"].values, b["prediction"].values)
    s = run_settings(back)
    assert (s.answer, s.cloze_norm) == ("cloze", "token")
    with pytest.raises(ValueError, match='answer = "cloze"'):
        rescore(store.build(**_plain_schema()))


def _plain_schema():
    return {
        "models": ["m"],
        "samples": ["s0"],
        "templates": ["ips1", "ips2"],
        "words": [["w"]],
        "prompts": np.asarray([["p", "q"]], dtype=object),
        "targets": [" A"],
        "n_max": 1,
    }


# ------------------------------------------------------------------ templates and formats


def test_cloze_forms_keep_the_wording_and_drop_the_options():
    from tests.support import EGG

    assert prompts.render(EGG, "cloze") == f"Question: {EGG.question}\nAnswer:"
    assert prompts.render(EGG, "ips4-cloze").endswith("\nANSWER::")
    assert prompts.render(EGG, "ips5-cloze") == prompts.render(EGG, "ips1-cloze")
    assert prompts.render_spans(EGG, "ips3-cloze").target == " dogs"
    assert "dogs" not in prompts.render(EGG, "ips2-cloze")
    words = prompts.variables(EGG, options=False)
    assert {w.field for w in words} == {"question"}
    shots = prompts.PAPER_SHOTS[:1]
    text = prompts.render(EGG, "cloze", shots=shots)
    assert text.startswith(f"Question: {shots[0].question}\nAnswer: sleet\n\nQuestion:")
    with pytest.raises(ValueError, match="open-ended"):
        prompts.cloze_form("open")


def test_cloze_format_space_has_no_enumeration():
    from psens.formats import GRAMMARS, formats_from_spec
    from psens.formats.grammar import CLOZE_HIDDEN

    spec = {"grammar": "default", "k": 12, "seed": 0}
    formats = formats_from_spec(spec, answer="cloze")
    keys = {f.spec_key("cloze") for f in formats}
    assert len(keys) == len(formats)  # distinct in their cloze forms
    for f in formats:
        assert all(f.coords[d] == GRAMMARS["default"].choices[d][0] for d in ("enum", "opt_name"))
    with pytest.raises(ValueError, match="render identically"):
        formats_from_spec([{"enum": "A."}, {"enum": "(A)"}], answer="cloze")
    cfg = RunConfig.from_dict(
        {
            "store": "x.zarr",
            "models": ["smollm2-135m-instruct"],
            "dataset": "arc-easy",
            "templates": spec,
        }
        | {"answer": "cloze"}
    )
    assert all(n.endswith(prompts.CLOZE_SUFFIX) for n in cfg.template_names)
    assert not set(CLOZE_HIDDEN) & set(cfg.template_coords)
    t = prompts.get_template(cfg.template_names[0])
    assert t.kind == "cloze" and not t.options_header


# ------------------------------------------------------------------ config and refusals


def _base(tmp_path, **extra):
    from tests.support import write_tiny_dataset

    data = tmp_path / "data.jsonl"
    if not data.exists():
        write_tiny_dataset(data)
    cfg = {
        "store": str(tmp_path / "r.zarr"),
        "models": ["smollm2-135m-instruct"],
        "dataset": "arc-easy",
        "dataset_path": str(data),
        "samples": 2,
        "templates": ["ips1", "ips2"],
        "n_vars": 2,
        "answer": "cloze",
    }
    cfg.update(extra)
    return cfg


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"answer": "letters"}, "answer = 'letters' is not known"),
        ({"cloze_norm": "bytes"}, "cloze_norm = 'bytes' is not known"),
        ({"answer": "letter", "cloze_norm": "sum"}, "cloze_norm = 'sum' but answer = \"letter\""),
        ({"templates": ["ips1", "ips5"]}, "'ips1-cloze' and 'ips5-cloze' render the same"),
        ({"answer": "letter", "templates": ["ips1", "cloze"]}, "'cloze' is a cloze prompt"),
        ({"templates": ["open", "ips1"]}, "'open' is an open-ended template"),
    ],
)
def test_bad_cloze_configs_are_refused_before_the_store(
    tmp_path, monkeypatch, capsys, change, match
):
    _refused(tmp_path, monkeypatch, capsys, _base(tmp_path, **change), match)


def test_open_ended_and_optionless_items_are_refused(tmp_path, monkeypatch, capsys):
    data = tmp_path / "open.jsonl"
    row = {"id": "o1", "question": "Name a bird.", "options": [], "answer": "owl"}
    data.write_text(json.dumps(row) + "\n")
    cfg = _base(tmp_path, dataset="dolly", dataset_path=str(data), samples=1)
    _refused(tmp_path, monkeypatch, capsys, cfg, "item 'o1' has no options")
    bad = tmp_path / "bad.jsonl"
    row = {"id": "b1", "question": "Pick one.", "options": ["dogs", "dogs"], "answer": "A"}
    bad.write_text(json.dumps(row) + "\n")
    cfg = _base(tmp_path, dataset_path=str(bad), samples=1)
    _refused(tmp_path, monkeypatch, capsys, cfg, "have the same text")


def _refused(tmp_path, monkeypatch, capsys, cfg, match):
    """``psens run`` on ``cfg`` exits 2 with one line matching ``match``: no traceback, no
    model loaded, no store made."""
    import yaml

    import psens.runner
    from psens.cli import main

    def boom(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(psens.runner, "run_scorer", boom)
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert main(["run", str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert re.search(match, err), err
    assert "Traceback" not in err
    assert not Path(cfg["store"]).exists()


def test_fingerprint_names_the_formulation():
    base = {"store": "x.zarr", "models": ["smollm2-135m-instruct"], "dataset": "arc-easy"}
    letter = RunConfig.from_dict(base)
    cl = RunConfig.from_dict({**base, "answer": "cloze"})
    named = RunConfig.from_dict({**base, "answer": "cloze", "cloze_norm": "char"})
    other = RunConfig.from_dict({**base, "answer": "cloze", "cloze_norm": "sum"})
    assert letter.fingerprint() != cl.fingerprint() == named.fingerprint() != other.fingerprint()
    assert RunConfig.defaults()["answer"] == "letter"


# ------------------------------------------------------------------ end to end


def test_cloze_ips_run_on_arc_easy_end_to_end(tmp_path):
    pytest.importorskip("torch")
    import psens
    from tests.support import write_tiny_smollm2

    model = write_tiny_smollm2(tmp_path / "model")
    cfg = {
        "store": str(tmp_path / "r.zarr"),
        "models": [str(model)],
        "dataset": "arc-easy",
        "split": "validation",
        "samples": 2,
        "templates": ["cloze", "ips2", "ips3"],
        "n_vars": 3,
        "answer": "cloze",
        "cloze_norm": "token",
        "generate": False,
        "threads": 1,
        "noise_floor": "bfloat16",
    }
    psens.run(cfg, quiet=True, progress=False)
    ds = psens.open_run(cfg["store"])
    assert (ds["status"].values == store.DONE).all(), ds["error"].values
    assert np.isfinite(ds["v_floor"].values[~np.isnan(ds["v"].values)]).all()
    assert list(ds["template"].values) == ["cloze", "ips2-cloze", "ips3-cloze"]
    assert (ds.attrs["answer"], ds.attrs["cloze_norm"]) == ("cloze", "token")
    for s, item in enumerate(psens.runner.select_items(RunConfig.from_dict(cfg))):
        assert "\nA." not in str(ds["prompt"].values[s, 0])  # no option lines
        assert list(ds["option_label"].values[s, : len(item.options)]) == list(item.labels)
        assert set(ds["word"].values[s]) - {""} <= set(re.findall(r"\w+", item.question))
    again = rescore(ds)  # the stored v is the run's normalisation, recomputed without a model
    np.testing.assert_allclose(again["v"].values, ds["v"].values, equal_nan=True, atol=1e-12)
    np.testing.assert_array_equal(again["prediction"].values, ds["prediction"].values)
    np.testing.assert_array_equal(again["correct"].values, ds["correct"].values)
    for norm in cloze.CLOZE_NORMS:
        assert 0.0 <= float(rescore(ds, norm)["accuracy"].values[0]) <= 1.0
    per_sample = psens.ips.ips(ds)
    assert np.isfinite(per_sample.values).all()
    settings = psens.settings.run_settings(ds)
    assert (settings.answer, settings.cloze_norm) == ("cloze", "token")
    # predictions only (n_vars = 0): the unmasked prompts' options, the same answers
    only = {**cfg, "store": str(tmp_path / "p.zarr"), "n_vars": 0, "noise_floor": False}
    pred = psens.run(only, quiet=True, progress=False)
    assert pred["option_loglik"].sizes["subset"] == 1
    np.testing.assert_array_equal(pred["prediction"].values, ds["prediction"].values)
    full = ds["option_loglik"].isel(subset=(2 ** ds["n_vars"]) - 1).drop_vars(["subset", "order"])
    np.testing.assert_allclose(
        pred["option_loglik"].isel(subset=0).drop_vars(["subset", "order"]).values,
        full.values,
        atol=1e-5,
    )


def test_rescore_gives_the_chosen_options_probability():
    ds = _stored_cloze_run()
    for norm in cloze.CLOZE_NORMS:
        out = rescore(ds, norm)
        ll, tok = ds["option_loglik"].values, ds["option_tokens"].values
        nbytes = ds["option_bytes"].values.astype(float)
        for s, n in enumerate((2, 3)):
            k = (3, 4)[s]
            for t in range(2):
                d = {"sum": np.ones(k), "token": tok[0, s, t, :k], "char": nbytes[s, :k]}[norm]
                scores = ll[0, s, t, 2**n - 1, :k] / d
                p = np.exp(scores) / np.exp(scores).sum()  # literal softmax over the options
                assert out["confidence"].values[0, s, t] == pytest.approx(p.max(), rel=1e-12)


def _cloze_pss_run():
    """A predictions-only cloze store (n_vars = 0) of 6 items x 3 templates, every block
    done, with random option log-likelihoods."""
    rng = np.random.default_rng(5)
    n_s, n_t = 6, 3
    ds = store.build(
        models=["m"],
        samples=[f"s{i}" for i in range(n_s)],
        templates=["cloze", "ips2-cloze", "ips3-cloze"],
        words=[[] for _ in range(n_s)],
        prompts=np.full((n_s, n_t), "p", dtype=object),
        targets=[" a"] * n_s,
        n_max=0,
        attrs={"answer": "cloze", "cloze_norm": "sum"},
        cloze={"labels": [["A", "B", "C"]] * n_s, "bytes": [[3, 4, 5]] * n_s, "answer": [0] * n_s},
    )
    ds["option_loglik"][:] = rng.uniform(-6, -1, size=(1, n_s, n_t, 1, 3))
    ds["option_tokens"][:] = 1.0
    ds["v"][:] = 0.0
    again = rescore(ds)
    ds["correct"][:] = again["correct"].values
    ds["confidence"][:] = 0.01  # a decoding confidence unrelated to the options
    ds["status"][:] = store.DONE
    return ds


def test_pss_confidence_of_a_cloze_run_is_the_chosen_options_probability():
    from psens.pss.runs import answer_confidence, instance_table

    ds = _cloze_pss_run()
    conf = answer_confidence(ds)
    np.testing.assert_allclose(conf.values, rescore(ds)["confidence"].values)
    assert (conf.values > 1 / 3).all()  # the top of three probabilities, never 0.01
    table = instance_table(ds)
    np.testing.assert_allclose(
        table["confidence"].to_numpy(), conf.mean("template").values.ravel(), rtol=1e-12
    )
    lettered = ds.assign_attrs(answer="letter")
    assert (instance_table(lettered)["confidence"] == 0.01).all()
