"""Templates of fig. 15/16, rendering, perturbation kinds, input variables."""

from __future__ import annotations

import dataclasses

import pytest

from psens import prompts
from psens.datasets import Item

EGG = Item(
    "egg",
    "Which one of these animals does NOT lay eggs?",
    (("A", "chickens"), ("B", "dogs"), ("C", "frogs"), ("D", "turtles")),
    "B",
)

EXPECTED = {
    "ips1": "Question: {q}\nAnswers:\nA.chickens\nB.dogs\nC.frogs\nD.turtles\nAnswer:",
    "ips2": "Question: {q}\nANSWERS:\nA.chickens\nB.dogs\nC.frogs\nD.turtles\nANSWER:",
    "ips3": "Question: {q}\nAnswers::\nA.chickens\nB.dogs\nC.frogs\nD.turtles\nAnswer::",
    "ips4": "Question: {q}\nANSWERS::\nA.chickens\nB.dogs\nC.frogs\nD.turtles\nANSWER::",
    "ips5": "Question: {q}\nAnswers:\nA)chickens\nB)dogs\nC)frogs\nD)turtles\nAnswer:",
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_five_templates_render_as_fig15(name):
    assert prompts.render(EGG, name) == EXPECTED[name].format(q=EGG.question)
    r = prompts.render_spans(EGG, name)
    assert r.target == " B"
    assert r.text[r.fields["question"] :].startswith(EGG.question)
    for label, text in EGG.options:
        assert r.text[r.fields[f"option:{label}"] :].startswith(text)


def test_perturbation_kinds_appendix_g():
    kinds = {n: prompts.get_template(n).perturbation for n in EXPECTED}
    assert kinds == {
        "ips1": "none",
        "ips2": "altering",
        "ips3": "adding",
        "ips4": "adding+altering",
        "ips5": "altering",
    }
    assert prompts.pair_perturbation("ips1", "ips3") == "adding"
    assert prompts.pair_perturbation("ips2", "ips4") == "adding"
    assert prompts.pair_perturbation("ips3", "ips4") == "altering"
    assert prompts.pair_perturbation("ips2", "ips5") == "altering"
    assert prompts.pair_perturbation("ips1", "ips1") == "none"


def test_few_shot_fig16():
    one = prompts.render(EGG, "ips1", shots=prompts.PAPER_SHOTS[:1])
    assert one.startswith(
        "Instruction: Read the following question and the four options provided. Choose the "
        "single best answer and provide only its corresponding letter.\nExample:\n"
        "Question: Which type of precipitation consists of frozen rain drops?\nAnswers:\n"
        "A.sleet\nB.hail\nC.snow\nD.fog\nAnswer: A\n\nQuestion: Which one"
    )
    four = prompts.render(EGG, "ips4", shots=prompts.PAPER_SHOTS)
    assert four.count("ANSWER:: ") == 3 and four.endswith("ANSWER::")
    assert four.count("Question: ") == 4
    # the item's field offsets account for the examples
    r = prompts.render_spans(EGG, "ips4", shots=prompts.PAPER_SHOTS)
    assert r.text[r.fields["question"] :].startswith(EGG.question)
    with pytest.raises(ValueError, match="disjoint"):
        prompts.render(EGG, "ips1", shots=[EGG])


def test_select_shots_disjoint_and_seeded():
    pool = [dataclasses.replace(EGG, id=f"p{i}", question=f"Q{i}?") for i in range(6)]
    a = prompts.select_shots(pool, 3, exclude=[pool[0]], seed=1)
    assert len(a) == 3 and pool[0] not in a
    assert a == prompts.select_shots(pool, 3, exclude=[pool[0]], seed=1)
    with pytest.raises(ValueError, match="disjoint"):
        prompts.select_shots(pool[:2], 3)


def test_open_template_appendix_k():
    it = Item("d1", "Identify the bald characters", context="Walter Skinner, Dana Scully")
    text = prompts.render(it, "open")
    assert text == (
        "Below is an instruction that describes a task. Write a response that appropriately "
        "completes the request.\n\n### Instruction:\nIdentify the bald characters\n\n"
        "### Input:\nWalter Skinner, Dana Scully\n\n### Response:"
    )
    with pytest.raises(ValueError, match="open"):
        prompts.render(it, "ips1")


def test_user_template_is_data():
    spec = dict(prompts.get_template("ips1").to_dict(), name="mine", answer="Reply:")
    t = prompts.Template.from_dict(spec)
    assert prompts.render(EGG, t).endswith("Reply:")
    with pytest.raises(ValueError, match="answer slot"):
        prompts.Template("bad", answer="")
    with pytest.raises(ValueError, match=r"\{question\}"):
        prompts.Template("bad", question="Q:")
    with pytest.raises(KeyError, match="ips1"):
        prompts.render(EGG, "nope")


def test_bad_items_fail_clearly():
    with pytest.raises(ValueError, match="not among its option labels"):
        prompts.render(dataclasses.replace(EGG, answer="E"), "ips1")
    with pytest.raises(ValueError, match="empty question"):
        prompts.render(dataclasses.replace(EGG, question="  "), "ips1")
    with pytest.raises(ValueError, match="empty question"):
        prompts.variables(dataclasses.replace(EGG, question=""))


def test_variables_short_item_keeps_every_word():
    vs = prompts.variables(EGG, n_max=16, as_text=True)
    assert vs[:5] == ["Which", "one", "of", "these", "animals"]
    assert "NOT" in vs and vs[-4:] == ["chickens", "dogs", "frogs", "turtles"]


def test_variables_long_item_filters_caps_and_is_seeded():
    vs = prompts.variables(EGG, n_max=6)
    words = [v.text for v in vs]
    assert len(words) == 6
    assert not {"of", "these", "does", "one"} & set(words)  # stop words dropped
    assert words == [v.text for v in prompts.variables(EGG, n_max=6)]
    others = {tuple(prompts.variables(EGG, n_max=4, seed=s, as_text=True)) for s in range(8)}
    assert len(others) > 1
    with pytest.raises(ValueError, match="cap"):
        prompts.variables(EGG, n_max=prompts.MAX_VARIABLES + 1)


def test_variables_phrase_merging_k2():
    it = Item(
        "x",
        "Identify from the following list characters from The X-Files who are bald or "
        "balding: Walter Skinner, John Fitzgerald Byers, Dana Scully, Queequeg",
    )
    words = prompts.variables(it, n_max=16, phrases=["bald or balding", "following list"])
    texts = [v.text for v in words]
    assert "bald or balding" in texts and "following list" in texts
    assert "Walter Skinner" in texts and "John Fitzgerald Byers" in texts
    assert "X-Files" in texts and "from" not in texts and "who" not in texts


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_variable_spans_point_at_the_words_in_every_template(name):
    vs = prompts.variables(EGG, n_max=8)
    for shots in ((), prompts.PAPER_SHOTS[:2]):
        r = prompts.render_spans(EGG, name, shots=shots)
        for v, (a, b) in zip(vs, prompts.prompt_spans(r, vs), strict=True):
            assert r.text[a:b] == v.text


def test_render_with_mask_for_display():
    vs = prompts.variables(EGG, n_max=16)
    keep_all_but_not = (2 ** len(vs) - 1) & ~(1 << [v.text for v in vs].index("NOT"))
    text = prompts.render(EGG, "ips1", masks=keep_all_but_not, variables_=vs)
    assert "does [MASK] lay" in text


def test_variables_are_words_with_positions():
    import pickle

    vs = prompts.variables(EGG, n_max=16)
    assert vs == prompts.variables(EGG, n_max=16, as_text=True)
    v = vs[vs.index("NOT")]
    assert isinstance(v, str) and v == "NOT" and v.field == "question"
    assert EGG.question[v.start : v.end] == "NOT"
    assert pickle.loads(pickle.dumps(v)).end == v.end


# ----------------------------------------------------------------------------- word segmentation


def test_combining_accent_does_not_split_a_word():
    import unicodedata

    decomposed = "Ve\u0301nus"
    it = Item("v", f"Which planet is {decomposed}?", (("A", "Mars"), ("B", decomposed)), "B")
    words = prompts.variables(it, n_max=10)
    assert [str(w) for w in words] == ["Which", "planet", "is", "Vénus", "Mars", "Vénus"]
    assert all(unicodedata.is_normalized("NFC", str(w)) for w in words)
    # the offsets still point into the original (decomposed) text
    v = words[3]
    assert it.question[v.start : v.end] == decomposed
    masked = prompts.render(it, "ips1", masks=0b110111, variables_=words)
    assert "[MASK]?" in masked and "\u0301" not in masked.split("\n")[0]


def test_text_without_spaces_gives_one_variable_per_cjk_character():
    it = Item("zh", "水是什么颜色?", (("A", "蓝色"), ("B", "红色")), "A")
    assert prompts.variables(it, n_max=16, as_text=True) == list("水是什么颜色蓝色红色")
    ja = Item("ja", "東京はどこ?", (("A", "日本"), ("B", "France")), "A")
    assert prompts.variables(ja, n_max=16, as_text=True) == [*"東京はどこ", "日", "本", "France"]
    # Hangul is written with spaces: its words stay words
    ko = Item("ko", "하늘은 무슨 색?", (("A", "파랑"), ("B", "빨강")), "A")
    assert prompts.variables(ko, n_max=16, as_text=True) == ["하늘은", "무슨", "색", "파랑", "빨강"]


def test_open_case_differs_from_open_only_in_the_case_of_its_section_names():
    it = Item(id="x", question="Write a haiku about rain.", options=None, answer=None)
    a, b = prompts.render(it, "open"), prompts.render(it, "open-case")
    assert a != b
    assert b == a.replace("### Instruction:", "### INSTRUCTION:").replace(
        "### Response:", "### RESPONSE:"
    )
    assert prompts.TEMPLATES["open-case"].changes == ("case",)
