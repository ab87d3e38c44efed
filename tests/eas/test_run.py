"""The stored EAS run: config checks, the run on fake generators, the file round trip, the
summary (API and CLI) and the refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import psens
from psens import method_runs, store
from psens.backends import DEFAULT_JUDGE_TEMPLATE, Response, instruction_text, parse_verdict
from psens.cli import main
from psens.eas import instance_metrics
from psens.eas import run as eas_run
from psens.eas.scoring import heuristic_scores
from tests.support import ROOT, script_module


class FakeGenerator:
    """Answers every prompt with its template's factors: the right option only when the
    format directive is on (so the heuristic sees a format effect), a long sentence
    otherwise; one prompt (the first T011 of each call) fails. As a judge it says "correct"
    for every response naming the reference's first word."""

    def __init__(self, name):
        self.name = name
        self.calls = 0

    def chat_many(self, conversations, **params):
        out = []
        for c in conversations:
            prompt = c[-1]["content"]
            directive = "Respond with only" in prompt
            answer = "A" if directive else "I would say the answer could be A or B."
            key = f"{self.name}:{len(out)}"
            if "yes or no" in prompt.lower():
                answer = "yes" if directive else "Well, perhaps."
            out.append(Response("ok", answer, key, attempts=1))
        out[0] = Response("failed", None, out[0].key, error="fake failure", attempts=1)
        self.calls += len(conversations)
        return out

    def __call__(self, prompts):
        return [("correct" if "Response to grade: A" in p else "incorrect") for p in prompts]


@pytest.fixture
def fake_models(monkeypatch):
    made = {}

    def generator(name, cfg, max_new_tokens):
        made.setdefault(name, FakeGenerator(name))
        return made[name]

    monkeypatch.setattr(eas_run, "_generator", generator)
    return made


def _config(tmp_path, **over):
    raw = {
        "method": "eas",
        "store": str(tmp_path / "eas.nc"),
        "models": ["smollm2-135m-instruct", "gemma3-270m"],
        "judge": "smollm2-135m-instruct",
        "datasets": ["arc-challenge", "boolq"],
        "samples": 2,
        **over,
    }
    return eas_run.EASConfig.from_dict(raw)


def test_run_writes_a_file_whose_rows_give_the_stored_metrics(tmp_path, fake_models):
    cfg = _config(tmp_path)
    ds = method_runs.run(cfg, progress=False)
    assert store.method_of(cfg.store) == "eas"
    back = psens.open_run(cfg.store)
    assert dict(back.sizes) == {"model": 2, "sample": 4, "template": 8}
    # the failed generation is recorded as failed, not scored
    status = back["status"].values
    assert (status == "failed").sum() == 2  # one per model
    assert np.isnan(back["heuristic"].values[status == "failed"]).all()
    assert np.isnan(back["judge"].values[status == "failed"]).all()
    rows = eas_run.rows(back)
    assert len(rows) == 2 * 4 * 8
    assert rows.loc[rows.status == "failed", "raw_response"].isna().all()
    # the stored heuristic scores are the scorers' on the stored responses
    h = heuristic_scores(rows.reset_index(drop=True)).to_numpy()
    np.testing.assert_array_equal(h, back["heuristic"].values.ravel())
    # SensH is the population std over the templates of the stored scores (slow reference)
    ref = np.array(
        [
            [np.std(x[~np.isnan(x)]) for x in back["heuristic"].values[m]]
            for m in range(back.sizes["model"])
        ]
    )
    np.testing.assert_allclose(back["sens_heuristic"].values, ref, rtol=0, atol=1e-15)
    # and the metrics recomputed from the file are the stored ones
    inst = instance_metrics(rows).set_index(["model_name", "id"])
    for col in eas_run.METRICS:
        got = back[col].values
        want = inst[col].reindex(
            pd.MultiIndex.from_product([back.model.values, back.sample.values])
        )
        np.testing.assert_array_equal(got.ravel(), want.to_numpy(float))
    assert set(back["trizone"].values.ravel()) <= {"artifact", "genuine", "underdetected", "stable"}
    # the format directive helps the heuristic on these fake answers
    assert back["effect_fmt_heuristic"].values.mean() > 0
    assert ds.attrs["judge"] == "smollm2-135m-instruct"


def test_summary_through_the_api_and_the_cli(tmp_path, fake_models, capsys):
    cfg = _config(tmp_path)
    method_runs.run(cfg, progress=False)
    text = method_runs.summarize(psens.open_run(cfg.store))
    assert "an illustration, not a finding" in text
    assert "generations failed: 2" in text
    assert main(["summary", cfg.store]) == 0
    assert "EAS run: 2 models x 4 items x 8 templates" in capsys.readouterr().out


def test_cli_runs_an_eas_config(tmp_path, fake_models, capsys):
    path = tmp_path / "eas.toml"
    path.write_text(
        f'method = "eas"\nstore = "{tmp_path / "x.nc"}"\nmodels = ["smollm2-135m-instruct"]\n'
        'judge = "smollm2-135m-instruct"\ndatasets = ["boolq"]\nsamples = 1\n'
    )
    assert main(["run", str(path), "--no-progress"]) == 0
    assert (tmp_path / "x.nc").is_file()
    assert main(["run", str(path), "--report", str(tmp_path / "r.html")]) == 2
    assert "for IPS runs" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"judges": "x"}, "unknown key 'judges'. Did you mean 'judge'"),
        ({"judge": ""}, "judge = ''"),
        ({"store": "out.zarr"}, "is not a .nc file"),
        ({"datasets": ["arc-challenge", "nope"]}, "unknown dataset 'nope'"),
        ({"datasets": []}, "datasets = []"),
        ({"models": ["no-such-model-xyz"]}, "no-such-model-xyz"),
        ({"models": ["gemma3-270m", "gemma3-270m"]}, "lists a model twice"),
        ({"samples": 0}, "samples"),
    ],
)
def test_bad_configs_are_refused_before_any_model(tmp_path, fake_models, over, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        _config(tmp_path, **over)
    assert not fake_models  # nothing was loaded


def test_missing_required_key(tmp_path):
    with pytest.raises(ValueError, match="required key 'judge' is missing"):
        eas_run.EASConfig.from_dict({"method": "eas", "store": "x.nc", "models": ["gemma3-270m"]})


def test_open_run_refuses_what_is_not_a_psens_run(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        psens.open_run(tmp_path / "missing.nc")
    other = tmp_path / "other.nc"
    other.write_bytes(b"not a netcdf file")
    assert store.method_of(other) is None
    with pytest.raises(ValueError, match="not a psens run"):
        psens.open_run(other)


def test_a_killed_write_leaves_no_file(tmp_path, monkeypatch):
    import xarray as xr

    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(xr.Dataset, "to_netcdf", boom)
    with pytest.raises(KeyboardInterrupt):
        store.write_method_run(xr.Dataset({"x": ("a", [1.0])}), tmp_path / "x.nc")
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------- verdicts read again from replies

SHIPPED = ROOT / "data" / "runs" / "eas.nc"
AMBIGUOUS = "The answer is correct but incorrect."


class AmbiguousJudge(FakeGenerator):
    """FakeGenerator whose judge names both polarities for the long-sentence answers: a reply
    the strict parser leaves unparsed (an earlier lenient parser read it as correct)."""

    def __call__(self, prompts):
        return [
            AMBIGUOUS if "Response to grade: I would say" in p else v
            for p, v in zip(prompts, super().__call__(prompts), strict=True)
        ]


def test_reread_gives_what_a_rerun_gives_and_the_script_rewrites_only_stale_files(
    tmp_path, monkeypatch
):
    """A file whose ambiguous replies were stored as "correct" (what the lenient parser read),
    with the metrics computed from those verdicts, is re-read into exactly the file a fresh
    run writes; scripts/reparse_judged.py does it to the file, and leaves a current one
    alone."""
    monkeypatch.setattr(eas_run, "_generator", lambda name, cfg, n: AmbiguousJudge(name))
    cfg = _config(tmp_path)
    method_runs.run(cfg, progress=False)
    fresh = psens.open_run(cfg.store)
    stale_cells = fresh["judge_raw"].values == AMBIGUOUS
    assert (
        stale_cells.sum() >= 8 and (fresh["judge_status"].values[stale_cells] == "unparsed").all()
    )
    # the file the lenient parser wrote: those verdicts ok and correct, metrics from them
    old = fresh.copy(deep=True)
    old["judge_status"].values[stale_cells] = "ok"
    old["judge"].values[stale_cells] = 1.0
    models, samples = ([str(x) for x in old[d].values] for d in ("model", "sample"))
    for name, var in eas_run._instance_vars(eas_run.rows(old), models, samples).items():
        old[name] = var
    assert not np.array_equal(old["sens_judge"].values, fresh["sens_judge"].values, equal_nan=True)
    again = method_runs.reread_verdicts(old)
    xr.testing.assert_identical(again, fresh)
    # the script on the stale file: --check says it would change, then the file is the fresh one
    stale = store.write_method_run(old, tmp_path / "stale.nc")
    script = script_module("reparse_judged")
    assert script.main(["--check", str(stale)]) == 1
    assert script.main([str(stale)]) == 0
    assert script_module("shipped_run").compare(stale, cfg.store) == []
    before = Path(cfg.store).stat().st_mtime_ns
    assert script.main([cfg.store]) == 0 and Path(cfg.store).stat().st_mtime_ns == before


def test_reread_refuses_a_run_without_a_judge():
    ds = xr.Dataset(attrs={"psens_method": "dbsa"})
    with pytest.raises(ValueError, match="has no judge verdicts"):
        method_runs.reread_verdicts(ds)


def test_the_shipped_run_holds_the_parsers_verdicts_of_its_replies():
    """Every stored verdict of data/runs/eas.nc is parse_verdict of its stored reply under the
    run's judge (binary, the default judge template's instruction), and the stored metrics
    are those of these verdicts."""
    ds = psens.open_run(SHIPPED)
    instruction = instruction_text(DEFAULT_JUDGE_TEMPLATE)
    raw, status, judge = (ds[k].values.ravel() for k in ("judge_raw", "judge_status", "judge"))
    for text, st, j in zip(raw, status, judge, strict=True):
        if st == "failed":  # no reply: nothing to parse, never scored
            assert np.isnan(j)
            continue
        v = parse_verdict(text, mode=eas_run.JUDGE_MODE, instruction=instruction)
        assert (v.status, v.correct) == (st, None if np.isnan(j) else bool(j)), text
    inst = instance_metrics(eas_run.rows(ds)).set_index(["model_name", "id"])
    midx = pd.MultiIndex.from_product([ds.model.values, ds.sample.values])
    for col in eas_run.METRICS:
        np.testing.assert_array_equal(
            ds[col].values.ravel(), inst[col].reindex(midx).to_numpy(float), err_msg=col
        )
    assert list(ds["trizone"].values.ravel()) == [
        z if isinstance(z, str) else "" for z in inst["trizone"].reindex(midx)
    ]


def test_the_runs_readme_eas_figures_are_the_shipped_runs():
    """data/runs/README.md quotes the unparsed count, the signed EAS of SmolLM2 on BoolQ with
    its interval and the four moved means as the shipped file gives them, and every interval
    contains 0 as it says (notebook 10 prints the same)."""
    from psens.eas import bootstrap_ci

    ds = psens.open_run(SHIPPED)
    text = " ".join((ROOT / "data" / "runs" / "README.md").read_text().split())
    status = ds["judge_status"].values
    assert f"{int((status != 'ok').sum())} of {status.size} verdicts" in text
    assert f"Unparsed verdicts went from 77 to {int((status == 'unparsed').sum())}" in text
    inst = instance_metrics(eas_run.rows(ds))

    def f(x: float) -> str:
        return f"{x:+.3f}".replace("-", "−")

    signed = {}
    for (model, dataset), g in inst.groupby(["model_name", "dataset"]):
        vals = g["signed_eas"].to_numpy(float)
        lo, hi = bootstrap_ci(vals)
        assert lo <= 0 <= hi, (model, dataset)
        signed[(model, dataset)] = (np.nanmean(vals), lo, hi)
    mean, lo, hi = signed[("smollm2-135m-instruct", "boolq")]
    assert f"SmolLM2 on BoolQ at its edge: {f(mean)} [{f(lo)}, {f(hi)}]" in text
    for (model, dataset), was in [
        (("gemma3-270m", "arc_challenge"), "+0.022"),
        (("gemma3-270m", "boolq"), "+0.071"),
        (("smollm2-135m-instruct", "boolq"), "−0.043"),
        (("smollm2-135m-instruct", "squad"), "−0.040"),
    ]:
        assert f"({was} → {f(signed[(model, dataset)][0])})" in text, (model, dataset)
