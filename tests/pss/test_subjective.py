"""The stored subjective PSS run: config refusals, the run on fake models, the judge through
the OpenAI-compatible client (a fake server), off-format verdicts recorded as failures, the
between-instance reference against a literal loop, the summary (API and CLI)."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

import psens
from psens import method_runs, store
from psens._runfile import method_attrs
from psens.backends import Response
from psens.cli import main
from psens.pss import subjective as S
from tests.test_backends import FakeServer


def literal_s_i(row):
    y = [v for v in row if not math.isnan(v)]
    pairs = list(itertools.combinations(y, 2))
    return sum(abs(a - b) for a, b in pairs) / len(pairs) if pairs else math.nan


class FakeModel:
    """Responds "answer <n>" with n the prompt's length mod 3; one response per call fails.
    As a judge it replies with a number read from the response ("answer 2" -> "8"), and
    off-format ("I think it is good.") for "answer 0"."""

    def __init__(self, name):
        self.name = name

    def chat_many(self, conversations, **params):
        out = []
        for c in conversations:
            prompt = c[-1]["content"]
            if "Response to grade:" in prompt:
                n = int(prompt.split("Response to grade: answer ")[1][0])
                text = "I think it is good." if n == 0 else str(4 * n)
            else:
                text = f"answer {len(prompt) % 3}"
            out.append(Response("ok", text, f"{self.name}:{len(out)}", attempts=1))
        if not any("Response to grade:" in c[-1]["content"] for c in conversations):
            out[1] = Response("failed", None, out[1].key, error="fake failure", attempts=1)
        return out


@pytest.fixture
def fake_models(monkeypatch):
    monkeypatch.setattr(S, "_generator", lambda name, cfg, n: FakeModel(name))


def _config(tmp_path, **over):
    raw = {
        "method": "subjective",
        "store": str(tmp_path / "subj.nc"),
        "models": ["smollm2-135m-instruct", "gemma3-270m"],
        "judge": "smollm2-135m-instruct",
        "judge_mode": "graded",
        "samples": 5,
        **over,
    }
    return S.RUN.config.from_dict(raw)


def test_run_stores_scores_s_i_and_records_off_format_verdicts_as_failures(tmp_path, fake_models):
    cfg = _config(tmp_path)
    method_runs.run(cfg, progress=False)
    assert store.method_of(cfg.store) == "subjective"
    ds = psens.open_run(cfg.store)
    assert dict(ds.sizes) == {"model": 2, "sample": 5, "version": 3}
    status, score = ds["judge_status"].values, ds["score"].values
    # the failed response is not judged: a failed verdict, no score
    assert ((ds["status"].values == "failed") == (status == "failed")).all()
    assert (status == "failed").sum() == 2  # one per model
    # an off-format reply is "unparsed", never a number
    for m, s, v in zip(*np.nonzero(status == "unparsed"), strict=True):
        assert ds["judge_raw"].values[m, s, v] == "I think it is good."
        assert ds["response"].values[m, s, v] == "answer 0"
    assert (status == "unparsed").any()
    assert np.isnan(score[status != "ok"]).all()
    ok = status == "ok"
    want = np.array([int(r.split()[1]) * 4 / 10 for r in ds["response"].values[ok]])
    np.testing.assert_allclose(score[ok], want)
    # S_i is eq. 1 over the scored versions (slow reference)
    ref = [[literal_s_i(list(score[m, s])) for s in range(5)] for m in range(2)]
    np.testing.assert_allclose(ds["S_i"].values, ref, equal_nan=True)
    # the prompts are ProSA's versions; the judge saw the original with every response
    items = S.instructions(cfg)
    assert list(ds["sample"].values) == list(items["instance"])
    assert ds["prompt"].values[0, 1] == items["v2"].iloc[0]
    assert ds.attrs["judge_note"] == S.JUDGE_NOTE
    assert "local model in this process" in ds.attrs["judge_path"]


class PreferenceJudge(FakeModel):
    """Answers like FakeModel; as a judge "Yes." for "answer 2", "No, it is worse." for
    "answer 1" and off-format for "answer 0"."""

    def chat_many(self, conversations, **params):
        if not any("Response: answer" in c[-1]["content"] for c in conversations):
            return super().chat_many(conversations, **params)
        replies = {"2": "Yes.", "1": "No, it is worse.", "0": "Let me think about it."}
        return [
            Response(
                "ok",
                replies[c[-1]["content"].split("Response: answer ")[1][0]],
                f"j:{k}",
                attempts=1,
            )
            for k, c in enumerate(conversations)
        ]


def test_preference_mode_scores_yes_1_no_0_and_keeps_off_format_replies_unscored(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(S, "_generator", lambda name, cfg, n: PreferenceJudge(name))
    ds = S.run(_config(tmp_path, judge_mode="preference"), progress=False)
    resp, status, score = (ds[k].values for k in ("response", "judge_status", "score"))
    assert "as good as the reference answer" in S.PREFERENCE_TEMPLATE
    np.testing.assert_array_equal(score[resp == "answer 2"], 1.0)
    np.testing.assert_array_equal(score[resp == "answer 1"], 0.0)
    assert (status[resp == "answer 0"] == "unparsed").all()
    assert np.isnan(score[resp == "answer 0"]).all()
    assert "yes (1) / no (0)" in S.summarize(ds)


def test_summary_through_the_api_and_the_cli(tmp_path, fake_models, capsys):
    cfg = _config(tmp_path)
    method_runs.run(cfg, progress=False)
    ds = psens.open_run(cfg.store)
    text = method_runs.summarize(ds)
    table = S.model_table(ds)
    assert S.JUDGE_NOTE in text
    for r in table.itertuples():
        assert f"unparsed {r.unparsed}, failed {r.failed}" in text
        assert r.ok + r.unparsed + r.failed == 15
    assert main(["summary", cfg.store]) == 0
    assert "subjective PSS run (alpaca): 2 models x 5 instructions" in capsys.readouterr().out


def test_the_judge_through_an_openai_compatible_server(tmp_path, monkeypatch):
    """judge_url: the same judge prompts go to a server; "7" scores 0.7, an off-format
    reply and an HTTP error are recorded as unparsed / failed verdicts."""
    monkeypatch.setattr(S, "_generator", lambda name, cfg, n: FakeModel(name))
    server = FakeServer()
    try:
        replies = iter(["7", "not a number at all", "7"] * 20)

        def behave(body, n):
            prompt = body["messages"][-1]["content"]
            assert "Response to grade:" in prompt and body["max_tokens"] == 6
            if "answer 1" in prompt:
                return (500, "server error")
            return (200, next(replies))

        server.behave = behave
        cfg = _config(tmp_path, judge="served-judge", judge_url=server.url, models=["gemma3-270m"])
        ds = S.run(cfg, progress=False)
    finally:
        server.close()
    status, score = ds["judge_status"].values, ds["score"].values
    assert set(np.unique(status)) <= {"ok", "unparsed", "failed"}
    assert (status == "unparsed").any() and (status == "ok").any()
    np.testing.assert_array_equal(score[status == "ok"], 0.7)
    assert np.isnan(score[status != "ok"]).all()
    answered_1 = ds["response"].values == "answer 1"
    assert (status[answered_1] == "failed").all()
    assert "server" in ds.attrs["judge_path"] and ds.attrs["judge_note"] == ""


def test_the_served_judge_timeout_is_a_config_key(tmp_path):
    """judge_timeout bounds each network step of a served judge call (the whole call: three
    times as long); default 60 s; it is stored with the run's config."""
    cfg = _config(tmp_path, judge="served-judge", judge_url="http://127.0.0.1:9/v1")
    assert cfg.judge_timeout == 60.0 and S._judge(cfg).client.timeout == 60.0
    cfg = _config(
        tmp_path, judge="served-judge", judge_url="http://127.0.0.1:9/v1", judge_timeout=2.5
    )
    client = S._judge(cfg).client
    assert (client.timeout, client.deadline) == (2.5, 7.5)
    assert method_attrs(S.METHOD, cfg)["judge_timeout"] == 2.5


def test_between_instance_null_matches_a_literal_loop():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 11, size=(9, 3)) / 10.0
    y[2, 1] = np.nan
    null, p = S.between_instance_null(y, n_perm=50, seed=4)
    idx = np.random.default_rng(4).random((50, 9, 3)).argsort(axis=1)
    vals = []
    for k in range(50):
        perm = np.column_stack([y[idx[k, :, v], v] for v in range(3)])
        vals.append(np.nanmean([literal_s_i(list(r)) for r in perm]))
    obs = np.nanmean([literal_s_i(list(r)) for r in y])
    assert null == pytest.approx(np.mean(vals))
    assert p == pytest.approx((1 + sum(v <= obs + 1e-12 for v in vals)) / 51)


def test_between_instance_null_tells_instance_signal_from_none():
    # every instance scored alike under its versions, instances apart: PSS 0, p small
    y = np.repeat(np.linspace(0, 1, 12)[:, None], 3, axis=1)
    null, p = S.between_instance_null(y, n_perm=500)
    assert null > 0.2 and p < 0.01
    # a judge that says the same number everywhere: PSS 0 and the null 0, p = 1
    null, p = S.between_instance_null(np.full((8, 3), 0.5), n_perm=100)
    assert null == 0 and p == 1


def _arena_folder(tmp_path):
    folder = tmp_path / "versions"
    folder.mkdir()
    for v in (1, 2, 3):
        lines = [
            json.dumps(
                {"question_id": f"q{i}", "cluster": "c", "turns": [{"content": f"v{v} task {i}"}]}
            )
            for i in range(4)
        ]
        (folder / f"Arena_Hard_Auto_question_v{v}.jsonl").write_text("\n".join(lines))
    return folder


def test_arena_reads_local_references_and_refuses_too_few(tmp_path):
    folder = _arena_folder(tmp_path)
    refs = tmp_path / "refs.jsonl"
    refs.write_text(
        "\n".join(json.dumps({"question_id": f"q{i}", "answer": f"ref {i}"}) for i in (0, 2, 3))
    )
    cfg = _config(
        tmp_path, benchmark="arena", versions=str(folder), references=str(refs), samples=3
    )
    items = S.instructions(cfg)
    assert list(items["instance"]) == ["q0", "q2", "q3"]  # q1 has no reference
    assert list(items["reference"]) == ["ref 0", "ref 2", "ref 3"]
    assert items["v3"].iloc[1] == "v3 task 2"
    with pytest.raises(ValueError, match="only 3 instances"):
        S.instructions(
            _config(
                tmp_path, benchmark="arena", versions=str(folder), references=str(refs), samples=4
            )
        )


@pytest.mark.parametrize(
    ("over", "needle"),
    [
        ({"benchmark": "mtbench"}, "benchmark"),
        ({"judge_mode": "pairwise"}, "judge_mode"),
        ({"benchmark": "arena"}, "reference answers"),
        ({"judge_url": "localhost:8080"}, "judge_url"),
        ({"versions": "no/such/folder"}, "does not exist"),
        ({"versions": "<an empty folder>"}, "lacks ProSA's version files"),
        ({"samples": 0}, "samples"),
        ({"judge": ""}, "judge"),
        ({"store": "x.zarr"}, ".nc"),
        ({"temperature": 1.0}, "temperature"),
        ({"judge_timeout": 0}, "judge_timeout"),
        ({"judge_timeout": "60"}, "judge_timeout"),
        ({"judge_timeout": float("nan")}, "judge_timeout"),
        ({"judge_timeout": True}, "judge_timeout"),
    ],
)
def test_bad_configs_are_refused_in_one_line_before_any_model(tmp_path, over, needle):
    if over.get("versions") == "<an empty folder>":
        over = {"versions": str(tmp_path)}
    with pytest.raises(ValueError, match=needle.replace(".", r"\.")) as info:
        _config(tmp_path, **over)
    assert "\n" not in str(info.value)


def test_bad_reference_files_are_refused(tmp_path):
    folder = _arena_folder(tmp_path)
    bad = tmp_path / "refs.json"
    bad.write_text('[{"id": 1}]')
    cfg = _config(tmp_path, benchmark="arena", versions=str(folder), references=str(bad), samples=2)
    with pytest.raises(ValueError, match="no records with an instance"):
        S.instructions(cfg)


def _shipped_run_module():
    from tests.dbsa.test_run import _shipped_run_module as load

    return load()


def test_shipped_run_regenerates_and_compares_a_subjective_run(tmp_path, fake_models):
    """scripts/shipped_run.py runs a subjective config into its file and --check's compare
    finds no difference on a rerun, and the changed items of another seed."""
    module = _shipped_run_module()
    config = tmp_path / "pss-x.toml"
    config.write_text(
        'method = "subjective"\nstore = "x.nc"\nmodels = ["gemma3-270m"]\n'
        'judge = "smollm2-135m-instruct"\njudge_mode = "graded"\nsamples = 4\n'
    )
    got = module.regenerate(config, tmp_path / "a.nc")
    assert got["bytes"] > 0
    module.regenerate(config, tmp_path / "b.nc")
    assert module.compare(tmp_path / "a.nc", tmp_path / "b.nc") == []
    config.write_text(config.read_text() + "seed = 1\n")
    module.regenerate(config, tmp_path / "c.nc")
    diffs = module.compare(tmp_path / "a.nc", tmp_path / "c.nc")
    assert "sample" in diffs and "attrs['seed']" in diffs


def test_every_shipped_config_has_its_file_and_the_pss_ones_are_what_notebook_09_reads(capsys):
    from psens import open_run
    from psens.config import RunConfig
    from psens.pss import is_pss_run
    from tests.support import ROOT

    runs = ROOT / "data" / "runs"
    for config in sorted(runs.glob("*.toml")):
        assert (runs / f"{config.stem}.nc").is_file(), f"{config.stem}.nc is not shipped"
        assert (runs / f"{config.stem}.nc").stat().st_size <= 5 * 2**20
    for name in ("pss-arc", "pss-csqa"):
        cfg = method_runs.load(runs / f"{name}.toml")
        assert isinstance(cfg, RunConfig) and cfg.n_vars == 0 and list(cfg.shots) == [0, 1, 3]
        ds = open_run(runs / f"{name}.nc")
        assert is_pss_run(ds) and dict(ds.sizes)["template"] == 12
        assert (ds["status"].values == 1).all()
        assert main(["summary", str(runs / f"{name}.nc")]) == 0
        out = capsys.readouterr().out
        for model in ds["model"].values:  # PSS, accuracy and confidence per model and shot
            line = next(x for x in out.splitlines() if x.strip().startswith(f"{model}:"))
            for shot in (0, 1, 3):
                assert f"{shot}-shot PSS " in line
            assert line.count("accuracy ") == 3 and line.count("confidence ") == 3
    sub = psens.open_run(runs / "pss-alpaca.nc")
    assert dict(sub.sizes) == {"model": 2, "sample": 12, "version": 3}
    assert sub.attrs["judge_note"] == S.JUDGE_NOTE
    assert main(["summary", str(runs / "pss-alpaca.nc")]) == 0
    assert S.JUDGE_NOTE in capsys.readouterr().out


def test_the_synthetic_run_is_labelled_and_has_the_run_layout():
    ds = S.synthetic_run(n_samples=12)
    assert ds.attrs["synthetic"] and S.summarize(ds).startswith("SYNTHETIC DATA")
    assert dict(ds.sizes) == {"model": 2, "sample": 12, "version": 3}
    status = ds["judge_status"].values
    assert (status == "unparsed").any() and np.isnan(ds["score"].values[status != "ok"]).all()
    ref = [[literal_s_i(list(ds["score"].values[m, s])) for s in range(12)] for m in range(2)]
    np.testing.assert_allclose(ds["S_i"].values, ref, equal_nan=True)


def test_check_ignores_a_config_key_added_later_at_its_default_only():
    """A committed file made before a config key existed matches a rerun that records the
    key at its default (RunConfig.defaults), and not one that sets another value."""
    import json

    same = _shipped_run_module()._same_config
    old = json.dumps({"store": "x.zarr", "seed": 0})
    assert same(old, json.dumps({"store": "x.zarr", "seed": 0, "normalization": "nonempty"}))
    assert not same(old, json.dumps({"store": "x.zarr", "seed": 0, "normalization": "all"}))
    assert not same(old, json.dumps({"store": "x.zarr", "seed": 1}))
    assert not same(old, json.dumps({"store": "x.zarr", "seed": 0, "banana": 1}))
    assert not same("not json", old)


def test_check_ignores_a_run_setting_recorded_later_at_its_default_only():
    """A method run's file records its settings as attributes: one made before a setting
    existed (pss-alpaca.nc has no ``judge_timeout``) matches a rerun that records the
    setting at the method's default, not one with another value or an unknown key."""
    added = _shipped_run_module()._added_at_default
    assert added("judge_timeout", 60.0, "subjective")
    assert not added("judge_timeout", 30.0, "subjective")
    assert not added("banana", 1, "subjective")
    assert not added("judge_timeout", 60.0, "no-such-method")


def test_reread_gives_what_a_rerun_gives(tmp_path, monkeypatch):
    """A preference run whose off-format replies were stored as "no" verdicts, with S_i from
    them, is re-read into exactly the run the parser writes; a current run is unchanged."""
    import xarray as xr

    monkeypatch.setattr(S, "_generator", lambda name, cfg, n: PreferenceJudge(name))
    S.run(_config(tmp_path, judge_mode="preference"), progress=False)
    fresh = psens.open_run(tmp_path / "subj.nc")
    cells = fresh["judge_status"].values == "unparsed"
    assert cells.any()
    old = fresh.copy(deep=True)
    old["judge_status"].values[cells] = "ok"
    old["score"].values[cells] = 0.0
    old["S_i"] = (("model", "sample"), np.zeros(old["S_i"].shape))
    xr.testing.assert_identical(method_runs.reread_verdicts(old), fresh)
    xr.testing.assert_identical(method_runs.reread_verdicts(fresh), fresh)


def test_the_shipped_run_holds_the_parsers_verdicts_of_its_replies():
    """Every verdict of data/runs/pss-alpaca.nc is parse_verdict of its stored reply under
    the run's preference judge; its S_i are those of the stored scores."""
    from psens.backends import instruction_text, parse_verdict
    from tests.support import ROOT

    ds = psens.open_run(ROOT / "data" / "runs" / "pss-alpaca.nc")
    assert ds.attrs["judge_mode"] == "preference"
    instruction = instruction_text(S.PREFERENCE_TEMPLATE)
    raw, status, score = (ds[k].values.ravel() for k in ("judge_raw", "judge_status", "score"))
    for text, st, y in zip(raw, status, score, strict=True):
        if st == "failed":
            assert np.isnan(y)
            continue
        v = parse_verdict(text, mode="binary", instruction=instruction)
        assert v.status == st and (v.value == y or (np.isnan(v.value) and np.isnan(y))), text
    ref = [[literal_s_i(list(row)) for row in m] for m in ds["score"].values]
    np.testing.assert_allclose(ds["S_i"].values, ref, equal_nan=True)
