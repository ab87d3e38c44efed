"""Runs over a format space on a tiny random-weight model: config, store coordinates, summary.

The tiny test tokenizer splits " a" and " 1" into " " + label (so lowercase and digit labels
are refused by the scorer: their answer tokens coincide); the runs here sample the ``ips``
grammar, whose labels are upper-case letters. The ``default`` grammar runs on SmolLM2 in the
shipped format-space run."""

from __future__ import annotations

import numpy as np
import pytest

from psens import prompts, store
from psens.cli import main
from psens.formats import Format, formats_from_spec
from psens.formats.analysis import accuracy_spread, format_pss, one_change_pairs

from ..support import write_tiny_dataset, write_tiny_model


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    d = tmp_path_factory.mktemp("fmt-assets")
    return {"model": write_tiny_model(d / "model"), "data": write_tiny_dataset(d / "data.jsonl")}


def _write(assets, path, templates: str, samples: int = 3, n_vars: int = 3):
    path.write_text(
        f'store = "{path.with_suffix(".zarr")}"\n'
        f'models = ["{assets["model"]}"]\n'
        'dataset = "arc-challenge"\n'
        f'dataset_path = "{assets["data"]}"\n'
        f"samples = {samples}\n"
        f"templates = {templates}\n"
        f'n_vars = {n_vars}\nsolver = "exact"\nseed = 0\nthreads = 1\ngenerate = false\n'
    )
    return path


@pytest.fixture(scope="module")
def fmt_run(assets, tmp_path_factory):
    cfg = _write(
        assets,
        tmp_path_factory.mktemp("fmt") / "fmt.toml",
        '{grammar = "ips", k = 6, seed = 0}',
        samples=4,
    )
    assert main(["run", str(cfg), "--no-progress"]) == 0
    return cfg, store.open_run(cfg.with_suffix(".zarr")).load()


def test_a_sampled_space_runs_and_stores_its_coordinates(fmt_run, capsys):
    cfg, ds = fmt_run
    want = formats_from_spec({"grammar": "ips", "k": 6, "seed": 0})
    assert list(ds.template.values) == [f.id for f in want]
    assert (ds.status.values == store.DONE).all()
    for f, t in zip(want, ds.template.values, strict=True):
        for dim, value in f.coords.items():
            assert ds[f"fmt_{dim}"].sel(template=t).item() == value
    # the prompts are the formats' renderings, the targets their answer tokens
    assert ds.prompt.values[0, 0] == prompts.render_spans(_item(ds, 0), want[0].id).text
    # slicing by a format dimension
    upper = ds.where(ds.fmt_case == ds.fmt_case.values[0], drop=True)
    assert set(upper.fmt_case.values) == {ds.fmt_case.values[0]}
    by = ds.set_xindex("fmt_enum").sel(fmt_enum=ds.fmt_enum.values[0])
    assert set(by.fmt_enum.values) == {ds.fmt_enum.values[0]} and by.sizes["template"] >= 1
    # the walk leaves pairs one change apart
    assert len(one_change_pairs(ds)) >= 5
    capsys.readouterr()
    assert main(["summary", str(cfg.with_suffix(".zarr"))]) == 0
    out = capsys.readouterr().out
    assert "accuracy spread over the templates" in out and "over 6 templates, spread" in out


def _item(ds, s):
    from psens.datasets import Item

    from ..support import QUESTIONS

    qid, q, opts, ans = next(x for x in QUESTIONS if x[0] == str(ds.sample.values[s]))
    return Item(qid, q, tuple(zip("ABC", opts, strict=True)), ans)


def test_spread_and_pss_against_a_literal_reference(fmt_run):
    _, ds = fmt_run
    c = ds.correct.values[0]  # [sample, template]
    acc = c.mean(axis=0)
    r = accuracy_spread(ds, n_perm=199).iloc[0]
    assert r["spread"] == pytest.approx(acc.max() - acc.min())
    assert r["best_accuracy"] == pytest.approx(acc.max()) and r["n_items"] == 4
    assert r["lo"] <= r["spread"] + 1e-12 <= r["hi"] + 2e-12 or r["spread"] == 0
    pairs = [(a, b) for a in range(6) for b in range(a + 1, 6)]
    ref = np.mean([np.mean([abs(row[a] - row[b]) for a, b in pairs]) for row in c])
    assert format_pss(ds).iloc[0] == pytest.approx(ref)


def test_an_answers_only_format_run_is_the_search_oracle(assets, tmp_path, capsys):
    """``n_vars = 0`` over a format space (the shipped formats-acc design): coordinates kept,
    the summary prints PSS and the accuracy spread, and the correctness table feeds the
    search."""
    from psens.formats.analysis import correctness
    from psens.formats.search import paired_search

    cfg = _write(assets, tmp_path / "acc.toml", '{grammar = "ips", k = 4, seed = 0}', n_vars=0)
    assert main(["run", str(cfg), "--no-progress"]) == 0
    ds = store.open_run(cfg.with_suffix(".zarr")).load()
    assert ds.sizes["template"] == 4 and "fmt_case" in ds.coords
    capsys.readouterr()
    assert main(["summary", str(cfg.with_suffix(".zarr"))]) == 0
    out = capsys.readouterr().out
    assert "0-shot PSS" in out and "accuracy spread over the templates" in out
    x = next(iter(correctness(ds).values()))
    assert x.shape == (3, 4)
    r = paired_search(x, x.size, seed=0)
    acc = x.mean(axis=0)
    assert acc[r.best] == acc.max() and acc[r.worst] == acc.min() and r.calls <= x.size


def test_an_explicit_list_of_points_runs(assets, tmp_path):
    cfg = _write(assets, tmp_path / "pts.toml", '[{case = "upper"}, {enum = "(A)"}]', samples=2)
    assert main(["run", str(cfg), "--no-progress"]) == 0
    ds = store.open_run(cfg.with_suffix(".zarr"))
    ids = [Format.from_coords(case="upper").id, Format.from_coords(enum="(A)").id]
    assert list(ds.template.values) == ids
    assert list(ds.fmt_case.values) == ["upper", "title"]


@pytest.mark.parametrize(
    ("templates", "match"),
    [
        ('{grammar = "ips", k = 9}', r"k = 9 is larger than the space \(8 formats\)"),
        ('[{case = "upper"}, {case = "upper"}]', "render the same point"),
        ('[{q_name = "Q"}, {q_name = "Q", q_case = "upper"}]', "render identically"),
        ('[{cue = "none", space = "space"}, {}]', "renders an empty field"),
        ('{grammar = "nope", k = 4}', "unknown grammar"),
        ('{grammar = "default"}', "gives no k"),
        ('[{casing = "upper"}, {}]', "unknown dimensions"),
        # the tiny tokenizer reads " a" as " " + "a": refused on the tokenizer, before the store
        ('[{enum = "a."}, {}]', "option labels .* do not begin with distinct answer tokens"),
    ],
)
def test_bad_format_spaces_fail_in_one_line_before_the_store(
    assets, tmp_path, capsys, templates, match
):
    cfg = _write(assets, tmp_path / "bad.toml", templates)
    assert main(["run", str(cfg), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    # at most the run's size estimate before the one error line
    lines = [ln for ln in err.splitlines() if not ln.startswith("psens run: 1 model(s)")]
    assert len(lines) == 1 and "Traceback" not in err
    assert __import__("re").search(match, err)
    assert not cfg.with_suffix(".zarr").exists()


def test_dimension_sensitivity_against_the_literal_ips(fmt_run):
    from psens.formats.analysis import dimension_sensitivity

    from ..support import ips_ref

    _, ds = fmt_run
    pairs = one_change_pairs(ds)
    table = dimension_sensitivity(ds, 0.1, n_boot=200).set_index(["dimension", "order"])
    names = list(ds.template.values)
    for dim, group in pairs.groupby("dimension"):
        for order in ("all", "low", "high"):
            per_item = []
            for s, n in enumerate(ds.n_vars.values):
                vals = []
                for a, b in zip(group.template_a, group.template_b, strict=True):
                    idx = [names.index(a), names.index(b)]
                    I_and = ds.I_and.values[0, s, idx, : 1 << n]
                    I_or = ds.I_or.values[0, s, idx, : 1 << n]
                    vals.append(ips_ref(I_and, I_or, 0.1, None if order == "all" else order))
                vals = [v for v in vals if np.isfinite(v)]
                if vals:
                    per_item.append(np.mean(vals))
            row = table.loc[(dim, order)]
            if per_item:
                assert row["ips"] == pytest.approx(np.mean(per_item), rel=1e-9)
                assert row["lo"] <= row["ips"] <= row["hi"] and row["n_pairs"] == len(group)
            else:
                assert np.isnan(row["ips"])


def test_spread_line_says_when_the_formats_tie():
    import pandas as pd

    from psens.formats.analysis import spread_line

    row = {
        "model": "m",
        "n_templates": 5,
        "n_items": 3,
        "best": "ips1",
        "best_accuracy": 2 / 3,
        "worst": "ips1",
        "worst_accuracy": 2 / 3,
        "n_best_ties": 5,
        "n_worst_ties": 5,
        "spread": 0.0,
        "lo": 0.0,
        "hi": 0.0,
        "null_spread": 0.0,
        "p_value": 1.0,
        "within_noise": True,
    }
    line = spread_line(pd.Series(row))
    assert "accuracy 0.67 under all 5 templates (they tie)" in line and "to 0.67" not in line
    row.update(worst="ips2", worst_accuracy=1 / 3, n_worst_ties=3, n_best_ties=2, spread=1 / 3)
    line = spread_line(pd.Series(row))
    assert "accuracy 0.33 (ips2 and 2 more tied) to 0.67 (ips1 and 1 more tied)" in line


def test_accuracy_spread_counts_the_ties(fmt_run):
    _, ds = fmt_run
    acc = ds.correct.values[0].mean(axis=0)
    r = accuracy_spread(ds, n_perm=19).iloc[0]
    assert r["n_best_ties"] == int((acc == acc.max()).sum())
    assert r["n_worst_ties"] == int((acc == acc.min()).sum())


def test_a_sampled_space_draws_only_formats_every_model_can_score(assets, tmp_path, capsys):
    """The tiny tokenizer reads " a" and " 1" as " " + label: a default-grammar space
    (whose enumerations include a. and 1.) samples only formats with the item's own labels,
    and the run goes through."""
    from psens.config import RunConfig
    from psens.formats.grammar import get_grammar
    from psens.formats.tokens import scorable
    from psens.models.served import load_tokenizer

    spec = '{grammar = "default", k = 6, seed = 0}'
    cfg = _write(assets, tmp_path / "d.toml", spec, samples=2, n_vars=0)
    assert main(["run", str(cfg), "--no-progress"]) == 0, capsys.readouterr().err
    ds = store.open_run(cfg.with_suffix(".zarr")).load()
    assert ds.sizes["template"] == 6 and (ds.status.values == store.DONE).all()
    tok = load_tokenizer(str(assets["model"]))[0]
    assert all(scorable(Format.from_id(t), [tok]) for t in ds.template.values)
    assert not set(ds.fmt_enum.values) & {"a.", "a)"}
    free = get_grammar("default").sample(6, 0)  # the draw without the tokenizers
    assert not all(scorable(f, [tok]) for f in free)
    got = RunConfig.from_any(cfg).formats
    assert [f.id for f in got] == list(ds.template.values)


def test_a_format_the_tokenizer_cannot_score_names_the_ones_it_can(
    assets, tmp_path, capsys, monkeypatch
):
    import psens.runner

    monkeypatch.setattr(psens.runner, "run_scorer", lambda *a, **k: pytest.fail("model loaded"))
    cfg = _write(assets, tmp_path / "p.toml", '[{enum = "a."}, {}]', samples=2, n_vars=0)
    assert main(["run", str(cfg), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "do not begin with distinct answer tokens" in err and "Traceback" not in err
    # the cue ends in a space for digit labels, so 1. and 1) tokenise apart here
    assert "Use formats whose enum is one of ['A.', 'A)', '(A)', '[A]', '1.', '1)']" in err, err
    assert "labels A, a or 1" not in err
    assert not cfg.with_suffix(".zarr").exists()


def test_the_target_is_in_the_label_space_of_the_predictions(assets, tmp_path):
    """A format that shows "1." labels stores the target as the item's own label, as the
    predictions are stored."""
    from psens.config import RunConfig
    from psens.runner import Plan

    cfg = _write(assets, tmp_path / "t.toml", '[{enum = "1."}, {enum = "a)"}]', samples=3)
    plan = Plan(RunConfig.from_any(cfg))
    assert [t.strip() for t in plan.targets] == [it.answer for it in plan.items]
    assert {it.answer for it in plan.items} <= {"A", "B", "C"}


@pytest.mark.parametrize("name", ["formats", "formats-acc"])
def test_shipped_format_runs_read_their_target_in_the_predictions_labels(name):
    """The shipped exports predate the target in the item's labels (they hold the first
    format's " a"): read through item_targets, a prediction equals the target exactly where
    it is marked correct."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "data" / "runs" / f"{name}.nc"
    ds = store.open_run(path)
    assert {str(t) for t in ds.target.values} <= {" a", " b", " c", " d", " e"}
    target = store.item_targets(ds)
    assert target.tolist() == [str(t).strip().upper() for t in ds.target.values]
    pred = ds.prediction.transpose("model", "sample", "template").values
    correct = ds.correct.transpose("model", "sample", "template").values
    assert ((pred == target[None, :, None]) == (correct == 1)).all()


def test_shipped_run_check_reads_an_older_target_as_psens_does(tmp_path):
    """``scripts/shipped_run.py --check`` compares the target as psens reads it: an older
    export (" a", the first format's labels) equals a new one (" A", the item's labels);
    another target still differs."""
    from pathlib import Path

    import xarray as xr

    from ..dbsa.test_run import _shipped_run_module

    old = Path(__file__).resolve().parents[2] / "data" / "runs" / "formats.nc"
    with xr.open_dataset(old, engine="h5netcdf") as ds:
        ds = ds.load()
    upper = np.asarray([str(t).upper() for t in ds.target.values], dtype=object)
    ds.assign(target=("sample", upper)).to_netcdf(tmp_path / "new.nc", engine="h5netcdf")
    wrong = np.asarray([" B" if str(t) != " b" else " C" for t in ds.target.values], dtype=object)
    ds.assign(target=("sample", wrong)).to_netcdf(tmp_path / "bad.nc", engine="h5netcdf")
    compare = _shipped_run_module().compare
    assert compare(old, tmp_path / "new.nc") == []
    assert compare(old, tmp_path / "bad.nc") == ["target"]
