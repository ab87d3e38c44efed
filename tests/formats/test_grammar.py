"""The format grammar: points, ids, sampling, neighbours, the IPS and EAS templates as points."""

from __future__ import annotations

import itertools

import pytest

from psens import prompts
from psens.datasets import Item
from psens.formats import (
    DIMENSIONS,
    GRAMMARS,
    IPS_POINTS,
    Format,
    check_distinct,
    eas_point,
    formats_from_spec,
    neighbours,
    sample,
)
from psens.formats.grammar import format_label
from psens.variants import EAS_TEMPLATE_IDS, as_item, render_variant

ITEM = Item(
    "x",
    "Which one does NOT lay eggs?",
    (("A", "chickens"), ("B", "dogs"), ("C", "frogs"), ("D", "hens")),
    "B",
)
CONTEXT = Item("c", "Who wins?", (("A", "me"), ("B", "you")), "A", context="A race.")


@pytest.mark.parametrize("name", list(IPS_POINTS))
@pytest.mark.parametrize("item", [ITEM, CONTEXT])
def test_ips_templates_are_points(name, item):
    f = Format.from_coords(IPS_POINTS[name])
    assert GRAMMARS["ips"].contains(f)
    a, b = prompts.render_spans(item, f.id), prompts.render_spans(item, name)
    assert (a.text, a.target, dict(a.fields)) == (b.text, b.target, dict(b.fields))
    shots = prompts.PAPER_SHOTS[:2]
    assert prompts.render(item, f.id, shots=shots) == prompts.render(item, name, shots=shots)
    assert f.template().perturbation == prompts.get_template(name).perturbation
    # masking goes through the same path: every masked prompt is the template's
    vs = prompts.variables(item, n_max=4)
    for m in (0, 5, 15):
        assert prompts.render(item, f.id, masks=m, variables_=vs) == prompts.render(
            item, name, masks=m, variables_=vs
        )


@pytest.mark.parametrize("tid", EAS_TEMPLATE_IDS)
def test_eas_design_is_a_subspace(tid):
    f = eas_point(tid)
    assert GRAMMARS["eas"].contains(f)
    assert prompts.render(ITEM, f.id) == render_variant(as_item(ITEM), tid)
    # the answer follows "Answer:" with a space, or starts its own line
    assert prompts.render_spans(ITEM, f.id).target == (" B" if tid.endswith("1") else "B")


def test_eas_grammar_spans_exactly_the_eight_templates():
    g = GRAMMARS["eas"]
    assert g.size == 8 and sorted(g.free) == ["cue", "directive", "role"]
    points = {g.point(i) for i in range(g.size)}
    assert points == {eas_point(t) for t in EAS_TEMPLATE_IDS}


def test_format_ids_are_stable_and_round_trip():
    assert Format.from_coords().id == "fmt-ips1"
    g = GRAMMARS["default"]
    for i in (0, 1, 777, g.size - 2, g.size - 1):
        f = g.point(i)
        assert Format.from_id(f.id) == f and hash(Format.from_id(f.id)) == hash(f)
        # get_template resolves an id without any registry (or names the bad point)
        if f.problem() is None:
            assert prompts.get_template(f.id).name == f.id
        else:
            with pytest.raises(ValueError, match="renders empty"):
                prompts.get_template(f.id)
    with pytest.raises(ValueError, match="not a format id"):
        Format.from_id("fmt-zz")
    with pytest.raises(ValueError, match="not a value"):
        Format.from_coords(case="shouting")
    with pytest.raises(ValueError, match="unknown dimensions"):
        Format.from_coords(casing="upper")


def _coded_id(f: Format) -> str:
    """The id earlier psens versions gave a format: fmt- + the index of each value."""
    codes = "0123456789abcdefghijklmnopqrstuvwxyz"
    return "fmt-" + "".join(
        codes[d.names.index(v)] for d, v in zip(DIMENSIONS, f.values, strict=True)
    )


def test_format_ids_are_readable_and_earlier_ids_still_resolve():
    f = Format.from_coords(case="upper", sep="double-colon", enum="(A)")
    assert f.id == "fmt-case=upper,sep=double-colon,enum=(A)"
    base = Format.from_coords().coords
    for f in sample(16, seed=3):
        parts = dict(p.split("=") for p in f.id.removeprefix("fmt-").split(","))
        assert parts == {k: v for k, v in f.coords.items() if base[k] != v}  # the changes
        old = _coded_id(f)
        assert Format.from_id(old) == f and format_label(old) == f.id
        assert prompts.render(ITEM, old) == prompts.render(ITEM, f.id)
    assert format_label("ips1") == "ips1" and format_label("fmt-case=upper") == "fmt-case=upper"
    for bad in ("fmt-", "fmt-case", "fmt-case=upper,case=lower", "fmt-shade=dark"):
        with pytest.raises(ValueError):
            Format.from_id(bad)


def test_runs_with_coded_format_ids_read_with_the_readable_ones():
    """The shipped format-space run was written with coded ids: it opens readable, and each
    name agrees with the run's fmt_* coordinates."""
    import h5py

    import psens
    from tests.support import ROOT

    path = ROOT / "data" / "runs" / "formats.nc"
    with h5py.File(path, "r") as f:
        stored = [x.decode() if isinstance(x, bytes) else str(x) for x in f["template"][...]]
    ds = psens.open_run(path)
    names = [str(t) for t in ds["template"].values]
    assert names == [format_label(t) for t in stored]
    assert all("=" in n or n == "fmt-ips1" for n in names)
    for k, name in enumerate(names):
        want = {d.name: str(ds[f"fmt_{d.name}"].values[k]) for d in DIMENSIONS}
        assert Format.from_id(name).coords == want
    a, b = str(ds["template_a"].values[0]), str(ds["template_b"].values[0])
    assert ds["pair"].values[0] == f"{a}|{b}" and {a, b} <= set(names)


def test_point_is_mixed_radix_over_the_choices():
    g = GRAMMARS["ips"]
    got = [g.point(i) for i in range(g.size)]
    want = [
        Format.from_coords(case=c, sep=s, enum=e)
        for c, s, e in itertools.product(
            ("title", "upper"), ("colon", "double-colon"), ("A.", "A)")
        )
    ]
    assert got == want


def test_rendering_of_a_point_reads_its_coordinates():
    f = Format.from_coords(
        q_name="Q", q_case="upper", q_sep="dash", opt_name="Choices", case="lower",
        sep="double-colon", space="blank-line", enum="(A)", enum_space="space", cue="Solution",
    )  # fmt: skip
    assert prompts.render(ITEM, f.id) == (
        "Q - Which one does NOT lay eggs?\n\nchoices::\n\n(A) chickens\n\n(B) dogs\n\n"
        "(C) frogs\n\n(D) hens\n\nsolution::"
    )
    assert prompts.render_spans(ITEM, f.id).target == " B"


@pytest.mark.parametrize(
    ("enum", "labels", "target"),
    [("1.", ["1.", "2.", "3.", "4."], "2"), ("a)", ["a)", "b)", "c)", "d)"], " b")],
)
def test_positional_labels_and_the_answer_token_agree(enum, labels, target):
    f = Format.from_coords(enum=enum)
    r = prompts.render_spans(ITEM, f.id)
    lines = r.text.splitlines()
    assert [ln[: len(labels[0])] for ln in lines[2:6]] == labels
    assert r.target == target
    # digit labels: the space goes in the cue, so " 1" never splits into " " + "1"
    assert r.text.endswith("Answer: ") == (enum == "1.")
    assert prompts.option_labels(ITEM, f.id)["B"] == target.strip()


def test_too_few_positional_labels_are_refused():
    many = Item("m", "Pick", tuple((c, c.lower()) for c in "ABCDEFGHIJ"), "C")
    with pytest.raises(ValueError, match="9 labels; item 'm' has 10 options"):
        prompts.render(many, Format.from_coords(enum="1.").id)


def test_sample_gives_k_distinct_reproducible_formats():
    for design in ("walk", "random"):
        a = sample(16, 3, design=design)
        assert a == sample(16, 3, design=design) and a != sample(16, 4, design=design)
        assert len({f.spec_key() for f in a}) == 16
        check_distinct(a)  # no duplicates, no empty field
    walk = sample(12, 0)
    # every format of a walk is one change away from an earlier one
    for i, f in enumerate(walk[1:], 1):
        assert any(len(f.differences(g)) == 1 for g in walk[:i])


def test_neighbours_are_one_change_away_and_render_differently():
    f = Format.from_coords(q_name="Q")
    near = neighbours(f)
    assert near and all(len(f.differences(g)) == 1 for g in near)
    assert all(g.spec_key() != f.spec_key() for g in near)
    # "Q" in upper case is "Q": that change renders nothing new and is skipped
    assert f.replace(q_case="upper") not in near and f.replace(q_case="lower") in near
    # a cue-less point needs its answer on a line of its own
    assert f.replace(cue="none") in near and f.replace(space="space", cue="none") not in near
    want = sum(
        len(d.values) - 1 for d in DIMENSIONS if len(GRAMMARS["default"].choices[d.name]) > 1
    )
    assert len(near) == want - 1  # 1 = the q_case change that renders the same
    assert neighbours(f.id) == near


def test_bad_points_and_sizes_are_refused_in_one_line():
    with pytest.raises(ValueError, match=r"renders an empty field .*cue = none with space = space"):
        check_distinct([Format.from_coords(cue="none", space="space")])
    with pytest.raises(ValueError, match="render identically"):
        check_distinct(
            [Format.from_coords(q_name="Q"), Format.from_coords(q_name="Q", q_case="upper")]
        )
    with pytest.raises(ValueError, match="render the same point"):
        formats_from_spec([{"case": "upper"}, {"case": "upper"}])
    with pytest.raises(ValueError, match=r"k = 9 is larger than the space \(8 formats\)"):
        formats_from_spec({"grammar": "ips", "k": 9})
    with pytest.raises(ValueError, match="unknown grammar"):
        formats_from_spec({"grammar": "nope", "k": 2})
    with pytest.raises(ValueError, match="unknown keys"):
        formats_from_spec({"grammar": "ips", "k": 2, "n": 3})
    assert len(formats_from_spec({"grammar": "ips", "k": 8, "seed": 1})) == 8


def test_digit_labels_that_share_a_first_token_are_refused_by_the_scorer():
    from psens import models

    from ..support import bpe_tokenizer, tiny_llama

    tok = bpe_tokenizer(unk="<|endoftext|>", pad="<|im_end|>")
    scorer = models.Scorer(tiny_llama(tok), tok, name="tiny", progress=False, n_max=3)
    bad = prompts.Template("spaced", option="{label}.{text}", labels="1")  # " 1" = " " + "1"?
    ids = [tok(" " + c, add_special_tokens=False)["input_ids"][0] for c in "1234"]
    if len(set(ids)) == len(ids):
        pytest.fail("the test tokenizer must split ' 1' into ' ' + '1'")
    with pytest.raises(ValueError, match="do not begin with distinct answer tokens") as err:
        scorer.encode(ITEM, bad)
    # the fix names the label styles that do tokenise apart here, not the failing one: under
    # this tokenizer " a" ... " d" are one token each, " A" ... " D" are not all
    first = {c: tok(" " + c, add_special_tokens=False)["input_ids"][0] for c in "abcdABCD"}
    assert len({first[c] for c in "abcd"}) == 4 and len({first[c] for c in "ABCD"}) < 4
    assert str(err.value).endswith("Use a label style whose labels tokenise apart here: a.")
    assert "labels A, a or 1" not in str(err.value)
    assert scorer.encode(ITEM, Format.from_coords(enum="1.").id).target_id >= 0


def test_the_docs_example_runs():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "format-spaces.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    for code in blocks:
        exec(compile(code, "docs/format-spaces.md", "exec"), {})
