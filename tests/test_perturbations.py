"""Appendix L: rewritten instructions, variables aligned across the versions, the run."""

from __future__ import annotations

import json

import numpy as np
import pytest

import psens
from psens import prompts
from psens.config import RunConfig
from psens.datasets import Item
from psens.ips.factors import pair_kinds
from psens.perturbations import align_variables, load_perturbations, variants
from tests.support import ROOT, write_tiny_model

ITEM = Item("x", "Identify from the following list characters from The X-Files who are bald.")
REWRITES = {
    "paraphrase": "Select from the list below figures from The X-Files that are BALD.",
    "reorder": "From The X-Files, identify characters who are bald from the following list.",
}


def _texts(aligned, rewrites=REWRITES):
    texts = {"original": ITEM.question, **rewrites}
    return {k: [texts[k][v.start : v.end] for v in vs] for k, vs in aligned.items()}


def test_variables_present_in_every_version_are_kept_case_insensitively():
    aligned = align_variables(ITEM, REWRITES, n_max=10)
    # K.2 units of the original: Identify, following, list, characters, X-Files, bald
    # ("The" is a stop word, so not part of the name); "following" and "characters" are
    # missing from the paraphrase, "Identify" is found in the reordering case-insensitively
    assert [str(v) for v in aligned["original"]] == ["list", "X-Files", "bald"]
    assert _texts(aligned)["paraphrase"] == ["list", "X-Files", "BALD"]
    assert _texts(aligned)["reorder"] == ["list", "X-Files", "bald"]
    # the spans are where the words are (the reordering's "list" is the last one)
    rv = aligned["reorder"][0]
    assert REWRITES["reorder"][rv.start : rv.end] == "list" and rv.start > 40


def test_an_explicit_mapping_pairs_differently_worded_variables():
    mapping = {"Identify": {"paraphrase": "Select"}, "characters": {"paraphrase": "figures"}}
    aligned = align_variables(ITEM, REWRITES, mapping=mapping, n_max=10)
    got = _texts(aligned)
    assert got["original"] == ["Identify", "list", "characters", "X-Files", "bald"]
    assert got["paraphrase"] == ["Select", "list", "figures", "X-Files", "BALD"]
    assert got["reorder"] == ["identify", "list", "characters", "X-Files", "bald"]


def test_the_cap_is_a_seeded_choice_in_text_order():
    a = align_variables(ITEM, REWRITES, n_max=2, seed=3)
    b = align_variables(ITEM, REWRITES, n_max=2, seed=3)
    assert [str(v) for v in a["original"]] == [str(v) for v in b["original"]]
    assert len(a["original"]) == len(a["paraphrase"]) == 2
    starts = [v.start for v in a["original"]]
    assert starts == sorted(starts)


def test_repeated_words_take_successive_occurrences():
    item = Item("y", "Roast a pig, then carve the pig.")
    aligned = align_variables(item, {"paraphrase": "Carve the pig after you roast the pig."})
    spans = [(v.start, v.end) for v in aligned["paraphrase"]]
    assert len(set(spans)) == len(spans)  # the two "pig"s are two places


@pytest.mark.parametrize(
    ("rewrites", "mapping", "message"),
    [
        ({"paraphrase": "Something else entirely."}, None, "no input variable of the original"),
        (REWRITES, {"dogs": {"paraphrase": "cats"}}, "not input variables of the original"),
        (REWRITES, {"Identify": {"paraphrase": "Choose"}}, "does not contain it"),
    ],
)
def test_sets_that_cannot_be_aligned_are_errors(rewrites, mapping, message):
    with pytest.raises(ValueError, match=message):
        align_variables(ITEM, rewrites, mapping=mapping)


def _write(tmp_path, items):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"items": items}))
    return path


def test_the_shipped_file_aligns_with_the_dataset():
    path = ROOT / "data" / "appendix_l" / "alpaca_eval.json"
    by_id = {it.id: it for it in psens.datasets.load("alpaca-eval")}
    entries = load_perturbations(path)
    assert len(entries) == 4
    for e in entries:
        versions = variants(by_id[e.id], e, n_max=5)
        lengths = {len(vs) for _, vs in versions.values()}
        assert len(lengths) == 1 and lengths.pop() >= 4


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"id": "a", "original": "x", "paraphrase": "y"}, "no 'reorder' text"),
        (
            {"id": "a", "original": "x", "paraphrase": "y", "reorder": "z", "extra": 1},
            "unknown keys",
        ),
        (
            {"id": "a", "original": "x", "paraphrase": "y", "reorder": "z", "mapping": {"x": 1}},
            "malformed mapping",
        ),
    ],
)
def test_bad_perturbation_files_are_refused(tmp_path, entry, message):
    with pytest.raises(ValueError, match=message):
        load_perturbations(_write(tmp_path, [entry]))


def test_an_original_that_is_not_the_datasets_is_refused(tmp_path):
    path = _write(
        tmp_path, [{"id": "x", "original": "Another text.", "paraphrase": "p", "reorder": "r"}]
    )
    with pytest.raises(ValueError, match="not the dataset's"):
        variants(ITEM, load_perturbations(path)[0])


def test_rewritten_templates_are_registered_with_their_kind():
    assert prompts.pair_perturbation("open", "open:paraphrase") == "paraphrase"
    assert prompts.pair_perturbation("open-case", "open-case:reorder") == "reorder"
    assert prompts.pair_perturbation("open", "open-case") == "altering"
    assert (
        prompts.rewrite_of("open-case:reorder") == "reorder" and prompts.rewrite_of("open") is None
    )
    # the template text is the open template's: the rewrite comes from the item
    assert prompts.render(ITEM, "open:paraphrase") == prompts.render(ITEM, "open")


def _cfg(tmp_path, **over):
    path = _write(
        tmp_path,
        [
            {
                "id": "alpaca-eval/eval/53",
                "original": "Please tell me about the romantic relationship between Julius "
                "Caesar and Cleopatra.",
                "paraphrase": "Could you describe the romantic relationship that Julius Caesar "
                "and Cleopatra had?",
                "reorder": "About Julius Caesar and Cleopatra: please tell me about their "
                "romantic relationship.",
            }
        ],
    )
    raw = {
        "store": str(tmp_path / "run.zarr"),
        "models": [str(write_tiny_model(tmp_path / "model"))],
        "dataset": "alpaca-eval",
        "perturbations": str(path),
        "templates": ["open", "open-case"],
        "samples": 1,
        "n_vars": 3,
        "generate": False,
        **over,
    }
    return RunConfig.from_dict(raw)


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"templates": ["ips1", "ips2"]}, "rewrites are for open-ended templates"),
        ({"templates": ["open:paraphrase"]}, "rewrites are for open-ended templates"),
        ({"perturbations": None, "templates": ["open", "open:paraphrase"]}, "no 'perturbations'"),
        ({"perturbations": "/no/such.json"}, "not found"),
    ],
)
def test_bad_perturbation_configs_are_refused(tmp_path, over, message):
    with pytest.raises(ValueError, match=message):
        _cfg(tmp_path, **over)


def test_a_run_scores_every_template_on_every_version(tmp_path):
    from psens.runner import Plan

    cfg = _cfg(tmp_path)
    ds = psens.run(cfg, progress=False, quiet=True).load()
    names = [str(t) for t in ds["template"].values]
    assert names == [
        "open",
        "open-case",
        "open:paraphrase",
        "open-case:paraphrase",
        "open:reorder",
        "open-case:reorder",
    ]
    prompt = {t: str(p) for t, p in zip(names, ds["prompt"].values[0], strict=True)}
    assert "Could you describe" in prompt["open:paraphrase"]
    assert "### INSTRUCTION:\nAbout Julius" in prompt["open-case:reorder"]
    # v of a rewrite is the scorer's value of the rewritten item with its aligned variables
    plan = Plan(cfg)
    scorer = psens.models.load(cfg.models[0])
    shown, shown_vars = plan.version(0, "open:paraphrase")
    n = len(shown_vars)
    ref = scorer.value(shown, "open:paraphrase", np.arange(1 << n), variables=shown_vars)
    t = names.index("open:paraphrase")
    np.testing.assert_allclose(ds["v"].values[0, 0, t, : 1 << n], ref, rtol=0, atol=1e-9)
    # the pair kinds tell template changes, paraphrases and reorderings apart
    kinds = pair_kinds(ds)
    assert kinds["open|open-case"] == "altering"
    assert kinds["open|open:paraphrase"] == "paraphrase"
    assert kinds["open-case|open-case:reorder"] == "reorder"
    assert kinds["open|open-case:paraphrase"] == "altering+paraphrase"
