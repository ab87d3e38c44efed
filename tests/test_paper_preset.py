"""``preset = "paper"`` and the switches it sets, against docs/paper-conventions.md.

The preset resolves to the documented values, explicit keys win, a bad preset is refused
before any store exists, the paper's normalisation matches a literal reference, the paper's
variable rule and few-shot examples are what the paper says, a tiny run with the preset
works end to end, and the doc's recomputed effects are what the script computes.
"""

from __future__ import annotations

import re
import tomllib

import numpy as np
import pytest

from psens import prompts
from psens.cli import main
from psens.config import PRESETS, RunConfig, apply_preset
from psens.ips import ips, normalize, sample_ips
from tests.support import EGG, ROOT, ips_ref, script_module, write_tiny_dataset, write_tiny_model

DOC = ROOT / "docs" / "paper-conventions.md"


def _base(store="/tmp/never.zarr", **extra):
    return {
        "store": str(store),
        "models": ["smollm2-135m-instruct"],
        "dataset": "arc-challenge",
        **extra,
    }


def _doc_preset_column() -> dict:
    """The TOML fragments of the doc table's ``preset = "paper"`` column, merged."""

    def cells(line: str) -> list[str]:
        return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]

    lines = [x for x in DOC.read_text().splitlines() if x.startswith("|")]
    col = cells(lines[0]).index('`preset = "paper"` sets')
    out: dict = {}
    for line in lines[2:]:
        for fragment in re.findall(r"`([a-z_]+ = [^`]+)`", cells(line)[col]):
            out.update(tomllib.loads(fragment))
    assert out.pop("preset") == "paper"  # the whole-preset row
    return out


def test_preset_resolves_to_the_documented_values():
    assert _doc_preset_column() == PRESETS["paper"]
    cfg = RunConfig.from_dict(_base(preset="paper"))
    for key, value in PRESETS["paper"].items():
        assert getattr(cfg, key) == value, key
    assert cfg.preset == "paper"


@pytest.mark.parametrize(
    ("explicit", "expect"),
    [
        ({"dtype": "float32"}, {"dtype": "float32", "solver": "sgd", "normalization": "all"}),
        ({"normalization": "nonempty"}, {"normalization": "nonempty", "dtype": "float16"}),
        ({"variables": "psens"}, {"variables": "psens", "shots_from": "paper"}),
        # a config that names its solver keeps its own solver settings
        ({"solver": "canonical"}, {"solver": "canonical", "solver_settings": {}}),
        (
            {"solver_settings": {"preset": "paper", "steps": 50}},
            {"solver": "sgd", "solver_settings": {"preset": "paper", "steps": 50}},
        ),
    ],
)
def test_explicit_keys_win(explicit, expect):
    cfg = RunConfig.from_dict(_base(preset="paper", **explicit))
    for key, value in expect.items():
        assert getattr(cfg, key) == value, key


def test_a_directly_built_config_gets_the_preset_at_check():
    cfg = RunConfig(**_base(preset="paper", dtype="bfloat16"))
    cfg.check()
    assert (cfg.dtype, cfg.solver, cfg.normalization) == ("bfloat16", "sgd", "all")


def test_preset_leaves_the_fingerprint_of_its_values():
    """A preset is its values: spelling them out gives the same run identity."""
    with_preset = RunConfig.from_dict(_base(preset="paper"))
    spelled = RunConfig.from_dict(_base(**PRESETS["paper"]))
    assert with_preset.fingerprint() == spelled.fingerprint()
    assert RunConfig.from_dict(_base()).fingerprint() != spelled.fingerprint()
    assert apply_preset({"a": 1}) == {"a": 1}


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"preset": "papers"}, r"preset = 'papers' is not known\. Use one of \['paper'\]"),
        ({"preset": 1}, "preset = 1 is not known"),
        ({"variables": "all"}, r"variables = 'all' is not known\. Use one of \['psens', 'paper'\]"),
        ({"shots_from": "hub"}, "shots_from = 'hub' is not known"),
        ({"normalization": "empty"}, "normalization = 'empty' is not known"),
        ({"shots": [0, 4], "shots_from": "paper"}, "the IPS paper gives 3 examples"),
        ({"preset": "paper", "noise_floor": "float16"}, "is the run's own dtype"),
    ],
)
def test_bad_values_are_refused_before_any_store(tmp_path, monkeypatch, capsys, change, match):
    import psens.runner

    def boom(*a, **k):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(psens.runner, "run_scorer", boom)
    store = tmp_path / "r.zarr"
    lines = [f'store = "{store}"', 'models = ["smollm2-135m-instruct"]']
    lines += ['dataset = "arc-challenge"', "samples = 2"]
    for key, value in change.items():
        lines.append(f"{key} = {value!r}".replace("'", '"'))
    cfg = tmp_path / "c.toml"
    cfg.write_text("\n".join(lines) + "\n")
    assert main(["run", str(cfg), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert re.search(match, err), err
    assert "Traceback" not in err
    assert not store.exists()


# ----------------------------------------------------------------------------- normalisation


@pytest.mark.parametrize("order", [None, "low", "mid", "high"])
@pytest.mark.parametrize("seed", range(6))
def test_paper_normalization_matches_a_literal_reference(seed, order):
    rng = np.random.default_rng(seed)
    a, o = rng.laplace(size=(2, 4, 1 << 4))
    a[:, 0] *= rng.uniform(0.5, 20)  # a bias that may or may not set the max
    got = float(ips(a, o, 0.1, order, normalization="all"))
    np.testing.assert_allclose(got, ips_ref(a, o, 0.1, order, empty=True), rtol=1e-12)


def test_paper_normalization_counts_the_empty_set():
    a, _ = normalize([8.0, 2.0, -1.0, 0.0], [0.0, 0.0, 4.0, 0.0], "all")
    assert a[0] == 1.0  # the bias is the max and normalises to 1 ...
    assert np.isnan(normalize([8.0, 2.0, -1.0, 0.0], [0.0, 0.0, 4.0, 0.0])[0][0])  # ... or NaN


def test_a_run_is_read_with_its_own_normalization():
    from psens.synthetic import synthetic_run

    ds = synthetic_run(n_samples=3, seed=1)
    default = sample_ips(ds, orders="all")
    ds.attrs["normalization"] = "all"
    assert np.allclose(
        sample_ips(ds, orders="all"), sample_ips(ds, orders="all", normalization="all")
    )
    assert np.allclose(
        sample_ips(ds, orders="all", normalization="nonempty"), default, equal_nan=True
    )
    assert not np.allclose(sample_ips(ds, orders="all"), default, equal_nan=True)
    assert sample_ips(ds, orders="all").attrs["normalization"] == "all"


# ----------------------------------------------------------------------------- variables, shots


def test_paper_variables_of_an_mcq_item_are_its_words():
    words = prompts.variables(EGG, n_max=16, as_text=True)
    assert prompts.variables(EGG, n_max=16, rule="paper", as_text=True) == words  # fig. 1
    stops = prompts.stop_words()
    psens_pick = prompts.variables(EGG, n_max=5, as_text=True)
    paper_pick = prompts.variables(EGG, n_max=5, rule="paper", as_text=True)
    assert not {w.lower() for w in psens_pick} & stops  # psens spends n on content words
    assert set(paper_pick) <= set(words) and len(paper_pick) == 5
    assert {w.lower() for w in paper_pick} & stops  # the paper's words include stop words


def test_paper_variables_of_an_open_item_drop_every_stop_word():
    item = prompts.Item("o", "Who is not bald among Walter Skinner and Dana Scully?")
    psens_vars = prompts.variables(item, n_max=16, as_text=True)
    paper_vars = prompts.variables(item, n_max=16, rule="paper", as_text=True)
    assert "not" in psens_vars  # psens keeps negations only while n fits ...
    assert paper_vars == ["bald", "Walter Skinner", "Dana Scully"]  # K.2: no stop word stays
    with pytest.raises(ValueError, match="rule='x' is unknown"):
        prompts.variables(item, rule="x")


# ----------------------------------------------------------------------------- a tiny run


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    pytest.importorskip("torch")
    d = tmp_path_factory.mktemp("assets")
    return {"model": write_tiny_model(d / "model"), "data": write_tiny_dataset(d / "data.jsonl")}


def test_a_tiny_run_with_the_preset(assets, tmp_path):
    import psens
    from psens.pipeline import run

    cfg = {
        "store": str(tmp_path / "p.zarr"),
        "models": [str(assets["model"])],
        "dataset": "arc-challenge",
        "dataset_path": str(assets["data"]),
        "samples": 2,
        "templates": ["ips1", "ips4"],
        "n_vars": 3,
        "shots": [0, 1],
        "solver_settings": {"preset": "paper", "steps": 300},
        "threads": 1,
        "generate": False,
        "preset": "paper",
    }
    ds = run(cfg, progress=False, quiet=True).load()
    assert ds.attrs["preset"] == "paper"
    assert ds.attrs["normalization"] == "all"
    assert (ds.attrs["solver_method"], ds.attrs["solver_preset"]) == ("sgd", "paper")
    assert psens.settings.run_settings(ds).dtype == "float16"
    shot1 = str(ds["prompt"].sel(shot=1).values[0, 0])
    assert prompts.PAPER_SHOTS[0].question in shot1  # appendix E.6's first example
    assert (ds["status"].values == psens.store.DONE).all()
    table = ds.psens.headline()
    assert np.isfinite(table["ips"]).all()
    ref = sample_ips(ds, orders="all", normalization="all")
    np.testing.assert_allclose(sample_ips(ds, orders="all"), ref, equal_nan=True)


# ----------------------------------------------------------------------------- the doc's numbers


def _script():
    return script_module("paper_conventions")


def test_the_docs_recomputed_effects_are_the_scripts():
    """The solver and normalisation rows of docs/paper-conventions.md, recomputed from the
    shipped run to the printed precision."""
    script = _script()
    text = DOC.read_text()
    rows = script.recomputed_rows()
    assert {r["setting"] for r in rows} == {"solver", "normalization", "solver + normalization"}
    for r in rows:
        assert script.effect_text(r) in text, script.effect_text(r)
    oe = script.open_ended_variables()  # the open-ended row: no item changes its variables
    assert oe == {"items": 4, "changed": 0}
    assert f"the same variables for {oe['items']} of {oe['items']} items" in text
