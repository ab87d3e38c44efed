"""The config schema: one table of keys from which the config classes, their defaults,
their per-key refusals and the key table of docs/runs.md come."""

from __future__ import annotations

import dataclasses

import pytest

from psens import config_schema as S
from psens.config import RunConfig
from psens.eas.run import EASConfig
from psens.method_runs import declared
from tests.support import script_module

#: the config class of every run: an IPS run's and each method run's (its declared RUN)
CLASSES = {"ips": RunConfig, **{m: declared(m).config for m in S.RUN_MODULES}}


def test_docs_runs_md_shows_the_table():
    keys = script_module("config_keys")
    text = keys.DOCS.read_text(encoding="utf-8")
    assert keys.updated(text) == text, "run python scripts/config_keys.py"
    stale = text.replace("| `tau` | ips | `0.1` |", "| `tau` | ips | `0.2` |")
    assert stale != text and keys.updated(stale) == text


@pytest.mark.parametrize("method", S.METHODS)
def test_each_config_class_has_exactly_its_rows(method):
    cls = CLASSES[method]
    rows = S.fields_for(method)
    names = [f.name for f in rows]
    assert len(set(names)) == len(names), "a key has two rows for one run"
    assert [f.name for f in dataclasses.fields(cls)] == names
    defaults = S.defaults(method)
    if method == "ips":
        assert RunConfig.defaults() == defaults
    else:
        assert dataclasses.asdict(cls()) == defaults and defaults["method"] == method


def test_a_list_default_is_copied_for_every_config():
    a, b = EASConfig(), EASConfig()
    a.datasets.append("piqa")
    assert b.datasets == ["arc-challenge", "boolq", "squad"]
    assert S.defaults("eas")["datasets"] == ["arc-challenge", "boolq", "squad"]


def test_rows_are_documented_in_one_line_and_their_defaults_pass_their_checks():
    for f in S.FIELDS:
        assert f.doc and "\n" not in f.doc, f.name
        assert set(f.methods) <= set(S.METHODS), f.name
        if isinstance(f.allowed, tuple) and f.default is not None:
            assert f.default in f.allowed, f.name
    S.check_fields(RunConfig(store="x.zarr", models=["m"], dataset="boolq"))


def test_required_keys_come_from_the_table():
    assert S.required("ips") == ("store", "models", "dataset")
    assert S.required("eas") == ("store", "models", "judge")
    assert S.required("dbsa") == ("store", "models", "prompts")
    with pytest.raises(ValueError, match="the required key 'dataset' is missing"):
        RunConfig.from_dict({"store": "x.zarr", "models": ["gemma3-270m"]})


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("seed", "abc", "'seed' must be an integer, got 'abc' (str). Fix the value of seed."),
        ("variables", "x", "variables = 'x' is not known. Use one of ['psens', 'paper']."),
        ("generate", "no", "Write generate = true or generate = false (without quotes)."),
        ("tau", 2, "tau=2 is outside (0.0, 1.0)"),
    ],
)
def test_check_field_refuses_in_one_line(name, value, message):
    with pytest.raises((TypeError, ValueError)) as info:
        S.check_field(name, value)
    assert str(info.value).startswith("psens config: ") and message in str(info.value)


def test_a_method_row_refuses_with_the_method_runs_message():
    with pytest.raises(ValueError, match=r"psens eas run: seed = 'a'\. Use an integer seed\."):
        S.check_field("seed", "a", "eas", "psens eas run")
