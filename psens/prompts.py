"""Prompt templates, rendering and input variables (IPS paper, appendices E.5, E.6, G, K.2).

Templates
---------
The five MCQ templates of fig. 15 (``ips1`` … ``ips5``) derive from template 1 by
case changes (``Answers`` → ``ANSWERS``), doubled separators (``:`` → ``::``) and
option markers (``A.`` → ``A)``). Rendered for an item, template 1 reads::

    Question: <question>
    Answers:
    A.<option A>
    B.<option B>
    ...
    Answer:

and the answer follows as ``" B"``. The ``Question:`` label and ``A.<text>`` with no
space follow the worked examples of appendix E.6 (fig. 15 draws the question as a
box); the paper does not show line breaks, psens puts each part on its own line.

A template is a :class:`Template` (a small declarative spec); register new ones
with :func:`register`, or pass a ``Template`` directly to :func:`render`.

Perturbation kinds (appendix G): *altering* tokens (changing case or a symbol) vs
*adding* tokens (``:`` → ``::``). Each template lists its ``changes`` relative to
``ips1``; :func:`pair_perturbation` gives the kind of any pair.

Cloze templates
---------------
A template of kind ``"cloze"`` shows the question without its options, and each option's
text is scored as the continuation of the prompt (lm-evaluation-harness's ``arc_easy`` /
``piqa`` prompt; Gu et al. 2024, OLMES). :func:`cloze_form` turns any template into its
cloze form (``"ips1-cloze"``: its wording, the options header, option lines and
instruction dropped); ``"cloze"`` is lm-eval's ``"Question: {question}\nAnswer:"``
(docs/answer-formulations.md).

Input variables
---------------
Words of the question and the options; template words are background (E.5). See
:func:`variables` (in a cloze prompt only the question's words: the options are not shown).
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from psens._validation import check_positive_int, fail
from psens.datasets import Item

__all__ = [
    "CHANGE_KINDS",
    "CLOZE_SUFFIX",
    "FEW_SHOT_INSTRUCTION",
    "LABEL_STYLES",
    "MAX_VARIABLES",
    "PAPER_SHOTS",
    "RESOLVERS",
    "REWRITES",
    "TEMPLATES",
    "VARIABLE_RULES",
    "Rendered",
    "Template",
    "Variable",
    "check_cloze_item",
    "cloze_form",
    "get_template",
    "option_labels",
    "pair_perturbation",
    "register",
    "render",
    "render_spans",
    "rewrite_name",
    "rewrite_of",
    "select_shots",
    "variables",
]

#: What kind of perturbation each elementary change is (appendix G).
CHANGE_KINDS: dict[str, str] = {
    "case": "altering",  # Answers -> ANSWERS
    "double-colon": "adding",  # : -> ::
    "paren-marker": "altering",  # A. -> A)
    # appendix L: the instruction itself is rewritten (psens.perturbations)
    "paraphrase": "paraphrase",  # a semantic paraphrase of the instruction
    "reorder": "reorder",  # the instruction's clauses in another order
    # a change of the format grammar (psens.formats) outside the three above: not classified
    # by appendix G
    "format": "format",
}

#: Option-label styles of :attr:`Template.labels`: the item's own labels (``""``) or labels
#: by position.
LABEL_STYLES: dict[str, str] = {
    "": "",
    "A": "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "a": "abcdefghijklmnopqrstuvwxyz",
    "1": "123456789",
}

#: The appendix L rewrites of an open-ended instruction (kinds of :data:`CHANGE_KINDS`).
REWRITES: tuple[str, ...] = ("paraphrase", "reorder")

#: The instruction line of the few-shot templates (fig. 16).
FEW_SHOT_INSTRUCTION = (
    "Instruction: Read the following question and the {n_options} options provided. "
    "Choose the single best answer and provide only its corresponding letter."
)

_NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}


@dataclass(frozen=True)
class Template:
    """A declarative prompt template.

    The rendered prompt is, joined by ``sep`` (empty parts skipped)::

        header
        context        (only when the item has one; after the question if not context_first)
        question
        options_header (MCQ only)
        option x k     (MCQ only)
        instruction    (only when set; before the answer slot)
        answer         (the answer slot; the model's answer follows it)

    Attributes
    ----------
    name : str
        Registry key.
    question : str
        Must contain ``{question}``.
    options_header : str
        Line before the options.
    option : str
        Must contain ``{label}`` and ``{text}``.
    answer : str
        The answer slot, e.g. ``"Answer:"``; empty only when the answer starts a line of
        its own (``sep`` ends with a line break and ``answer_prefix`` is empty).
    answer_prefix : str
        What separates the slot from the answer: the target is ``answer_prefix +
        label`` (``" B"``).
    labels : {"", "A", "a", "1"}
        How options are labelled: the item's own labels (``""``, default) or by position
        as ``A B C``, ``a b c`` or ``1 2 3`` (:data:`LABEL_STYLES`). The answer token
        follows the shown label (``" 2"``), so labels and answer always agree.
    instruction : str
        A line before the answer slot; ``{labels}`` is replaced by the shown labels
        ("A, B, C, or D") and ``{what}`` by ``letter`` or ``number``.
    sep : str
        Separator between parts.
    context : str
        Must contain ``{context}``; used when ``item.context`` is not empty.
    header : str
        Text before everything (instruction templates).
    kind : {"mcq", "open", "cloze"}
        ``"cloze"``: the options are not shown; each option's text, preceded by
        ``answer_prefix`` (the target delimiter, lm-eval's ``target_delimiter``), is scored
        as a continuation (:func:`cloze_form`, :meth:`psens.models.Scorer.choice_logprobs`).
    changes : tuple of str
        Elementary changes relative to ``ips1`` (keys of :data:`CHANGE_KINDS`).
    layout : str
        A whole prompt as one format string (a published prompt copied verbatim, e.g.
        ProSA's ``"Question:\\n{question} A. {textA} B. {textB} ..."``). When set it replaces
        the parts above: the prompt is ``layout`` with its placeholders filled, and its end
        is the answer slot. Few-shot examples are the same layout, each followed by
        ``"Answer: <label>"`` (``" <label>"`` when the layout already ends with ``:``).
    layout_fields : tuple of (str, str)
        ``(role, placeholder)`` pairs of ``layout``: role ``"question"`` or
        ``"option:<label>"``. Every placeholder must be listed and every listed
        placeholder must occur (a prompt that lost ``{textC}`` is refused); an item must
        have exactly the listed options.
    """

    name: str
    question: str = "Question: {question}"
    options_header: str = "Answers:"
    option: str = "{label}.{text}"
    answer: str = "Answer:"
    answer_prefix: str = " "
    sep: str = "\n"
    context: str = "Passage: {context}"
    context_first: bool = True
    header: str = ""
    labels: str = ""
    instruction: str = ""
    kind: str = "mcq"
    changes: tuple[str, ...] = ()
    description: str = ""
    layout: str = ""
    layout_fields: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        where = f"Template {self.name!r}"
        if self.layout or self.layout_fields:
            _check_layout(self, where)
        own_line = self.sep.endswith("\n") and not self.answer_prefix
        if not self.answer.strip() and not (own_line and not self.answer):
            fail(where, "has no answer slot (answer is empty)", 'Set answer= e.g. "Answer:"')
        if self.labels not in LABEL_STYLES:
            fail(
                where,
                f"labels={self.labels!r} is not a label style",
                f"Use one of {list(LABEL_STYLES)}",
            )
        if "{question}" not in self.question:
            fail(where, "question has no {question} field", 'Use e.g. "Question: {question}"')
        if self.kind not in ("mcq", "open", "cloze"):
            fail(where, f"kind={self.kind!r} is not known", "Use 'mcq', 'open' or 'cloze'")
        if self.kind == "mcq" and not ("{label}" in self.option and "{text}" in self.option):
            fail(where, "option needs {label} and {text} fields", 'Use e.g. "{label}.{text}"')
        if "{context}" not in self.context:
            fail(where, "context has no {context} field", 'Use e.g. "Passage: {context}"')
        unknown = set(self.changes) - set(CHANGE_KINDS)
        if unknown:
            fail(where, f"unknown changes {sorted(unknown)}", f"Use keys of {list(CHANGE_KINDS)}")

    @property
    def option_labels(self) -> tuple[str, ...]:
        """The option labels a layout template shows (empty for other templates)."""
        return tuple(r.split(":", 1)[1] for r, _ in self.layout_fields if r.startswith("option:"))

    @property
    def perturbation(self) -> str:
        """``"none"``, ``"altering"``, ``"adding"`` or ``"altering+adding"`` vs ``ips1``."""
        return _kinds(self.changes)

    @classmethod
    def from_dict(cls, spec: Mapping) -> Template:
        """Build a template from a mapping (e.g. read from YAML/JSON)."""
        spec = dict(spec)
        if "changes" in spec:
            spec["changes"] = tuple(spec["changes"])
        if "layout_fields" in spec:
            spec["layout_fields"] = tuple(tuple(f) for f in spec["layout_fields"])
        return cls(**spec)

    def to_dict(self) -> dict:
        """The spec as a plain dict (round-trips through :meth:`from_dict`)."""
        d = dataclasses.asdict(self)
        d["changes"] = list(self.changes)
        d["layout_fields"] = [list(f) for f in self.layout_fields]
        return d


def _layout_placeholders(layout: str, where: str) -> list[str]:
    """The placeholder names of a format string, in order (``{{`` is a literal brace)."""
    import string

    try:
        parsed = list(string.Formatter().parse(layout))
    except ValueError as exc:
        fail(where, f"layout is not a format string ({exc})", "Balance its braces ({{ for '{')")
    names = [name for _, name, _, _ in parsed if name is not None]
    if any(not n or not n.isidentifier() for n in names):
        fail(where, "layout has an empty or non-name placeholder", "Name every {placeholder}")
    return names


def _check_layout(t: Template, where: str) -> None:
    """A layout template names the question and each option once, by listed placeholders."""
    if t.description:
        where = f"{where} ({t.description})"
    if not t.layout:
        fail(where, "has layout_fields but no layout", "Give the prompt as layout=")
    roles = [r for r, _ in t.layout_fields]
    if "question" not in roles:
        fail(where, "layout_fields has no 'question' role", 'Add ("question", "<placeholder>")')
    bad = [r for r in roles if r != "question" and not r.startswith("option:")]
    if bad or len(set(roles)) != len(roles):
        fail(where, f"layout_fields roles {roles}", 'Use "question" and "option:<label>" once each')
    found = _layout_placeholders(t.layout, where)
    listed = {ph: role for role, ph in t.layout_fields}
    for ph, role in listed.items():
        if ph not in found:
            fail(
                where,
                f"the prompt has no {{{ph}}} placeholder (the {role.replace(':', ' ')})",
                f"Restore {{{ph}}} in the prompt: every variant shows the question and all options",
            )
    unknown = sorted(set(found) - set(listed))
    if unknown:
        fail(
            where,
            f"the prompt has placeholders {unknown} that name no field",
            f"Use only {sorted(listed)} (or write a literal brace as {{{{ }}}})",
        )
    twice = sorted({ph for ph in found if found.count(ph) > 1})
    if twice:
        fail(where, f"the prompt repeats the placeholders {twice}", "Show each field once")
    if t.kind != ("mcq" if t.option_labels else "open"):
        fail(
            where,
            f"kind={t.kind!r} but the layout has {len(t.option_labels)} options",
            "Use kind 'mcq' for a layout with options, 'open' without",
        )


def _kinds(changes: Iterable[str]) -> str:
    kinds = sorted({CHANGE_KINDS[c] for c in changes})
    return "+".join(kinds) if kinds else "none"


TEMPLATES: dict[str, Template] = {}


def register(template: Template, *, overwrite: bool = False) -> Template:
    """Add a template to :data:`TEMPLATES` (refuses to replace one unless ``overwrite``)."""
    if template.name in TEMPLATES and not overwrite:
        fail(
            "psens.prompts.register",
            f"a template named {template.name!r} exists",
            "Pick another name or pass overwrite=True",
        )
    TEMPLATES[template.name] = template
    return template


for _t in (
    Template("ips1", description="fig. 15, prompt template 1 (base)"),
    Template(
        "ips2",
        options_header="ANSWERS:",
        answer="ANSWER:",
        changes=("case",),
        description="fig. 15, template 2: upper case",
    ),
    Template(
        "ips3",
        options_header="Answers::",
        answer="Answer::",
        changes=("double-colon",),
        description="fig. 15, template 3: doubled separators",
    ),
    Template(
        "ips4",
        options_header="ANSWERS::",
        answer="ANSWER::",
        changes=("case", "double-colon"),
        description="fig. 15, template 4: upper case and doubled separators",
    ),
    Template(
        "ips5",
        option="{label}){text}",
        changes=("paren-marker",),
        description="fig. 15, template 5: option markers A)",
    ),
    Template(
        "open",
        kind="open",
        header=(
            "Below is an instruction that describes a task. "
            "Write a response that appropriately completes the request."
        ),
        question="### Instruction:\n{question}",
        context="### Input:\n{context}",
        context_first=False,
        answer="### Response:",
        answer_prefix="\n",
        sep="\n\n",
        description="appendix K.2 instruction template (open-ended items)",
    ),
):
    register(_t)
register(
    dataclasses.replace(
        TEMPLATES["open"],
        name="open-case",
        question="### INSTRUCTION:\n{question}",
        answer="### RESPONSE:",
        changes=("case",),
        description="the appendix K.2 template with upper-case section names",
    )
)
register(
    dataclasses.replace(
        TEMPLATES["open"],
        name="open-colon",
        answer="### Response::",
        changes=("double-colon",),
        description="the appendix K.2 template with a doubled colon after the response cue",
    )
)


#: The name of a template's cloze form: ``"ips1"`` -> ``"ips1-cloze"`` (:func:`cloze_form`).
CLOZE_SUFFIX = "-cloze"

#: Changes (:data:`CHANGE_KINDS`) that only touch the option lines: a cloze prompt, which
#: does not show the options, cannot show them.
_OPTION_CHANGES = frozenset({"paren-marker"})


def cloze_form(template: str | Template) -> Template:
    """The cloze form of a multiple-choice template: its wording without the options.

    The options header, the option lines and the instruction (which names the labels) are
    dropped; the question, context, header, separators and answer slot are kept, and each
    option's text follows the answer slot as a continuation, preceded by ``answer_prefix``
    (the target delimiter, a space by default). A slot that ends in whitespace with no
    prefix (``"Answer: "``, a format with number labels) gives that whitespace to the
    prefix. The form is named ``<name>-cloze`` (:data:`CLOZE_SUFFIX`) and
    :func:`get_template` builds it from that name; ``ips5`` (option markers ``A)``) has the
    same cloze form as ``ips1``. A cloze template is returned as it is.

    References
    ----------
    .. [1] Gu, Y., Tafjord, O., Kuehl, B., Haddad, D., Dodge, J., and Hajishirzi, H.
       "OLMES: A Standard for Language Model Evaluations." arXiv:2406.08446, 2024.

    Examples
    --------
    >>> from psens.datasets import Item
    >>> it = Item("x", "Which one does NOT lay eggs?", (("A", "chickens"), ("B", "dogs")), "B")
    >>> print(render(it, "ips2-cloze"))
    Question: Which one does NOT lay eggs?
    ANSWER:
    >>> render_spans(it, "ips2-cloze").target
    ' dogs'
    """
    where = "psens.prompts.cloze_form"
    t = get_template(template)
    if t.kind == "cloze":
        return t
    if t.kind != "mcq":
        fail(
            where,
            f"template {t.name!r} is for open-ended items",
            "Cloze scores the options of multiple-choice items: use an MCQ template",
        )
    if t.layout:
        fail(
            where,
            f"template {t.name!r} is a fixed layout that lists the options",
            "Use a template built from parts (ips1 ... ips5, a format) or 'cloze'",
        )
    answer, prefix = t.answer, t.answer_prefix
    stripped = answer.rstrip()
    if stripped and stripped != answer and not prefix:
        answer, prefix = stripped, answer[len(stripped) :]
    return dataclasses.replace(
        t,
        name=t.name + CLOZE_SUFFIX,
        kind="cloze",
        options_header="",
        option=Template.option,  # not shown: formats that differ only here are one prompt
        instruction="",
        labels="",
        answer=answer,
        answer_prefix=prefix,
        changes=tuple(c for c in t.changes if c not in _OPTION_CHANGES),
        description=f"{t.description or t.name}; cloze form (the options are not shown)",
    )


def check_cloze_item(item: Item, where: str = "psens.prompts") -> None:
    """Refuse an item whose options cannot be scored as continuations: no options, an empty
    option, or two options whose texts are the same (they would score identically)."""
    if not item.options:
        fail(
            where,
            f"item {item.id!r} has no options: a cloze prompt scores each option's text",
            'Use a multiple-choice dataset with answer = "cloze", or answer = "letter"',
        )
    seen: dict[str, str] = {}
    for label, text in item.options:
        if not str(text).strip():
            fail(
                where,
                f"option {label!r} of item {item.id!r} is empty: it has no text to score",
                "Drop the item from 'samples'",
            )
        key = str(text).strip()
        if key in seen:
            fail(
                where,
                f"options {seen[key]!r} and {label!r} of item {item.id!r} have the same text "
                f"({key!r}): as continuations they score identically",
                "Drop the item from 'samples'",
            )
        seen[key] = label


#: Families of templates named by a prefix and built from the name on demand
#: (``"fmt-"``: the points of :mod:`psens.formats`, registered by that package).
RESOLVERS: dict[str, Callable[[str], Template]] = {}


def rewrite_name(template: str, rewrite: str) -> str:
    """The name of ``template`` shown with an appendix L rewrite of the instruction:
    ``"open:paraphrase"``."""
    return f"{template}:{rewrite}"


# Appendix L: every open-ended template also exists with each rewrite of the instruction.
# The template text is the same; the rewritten instruction comes from the item
# (psens.perturbations), and the rewrite is one more change of the template, so pair
# kinds (pair_perturbation) tell template changes, paraphrases and reorderings apart.
for _t in [t for t in TEMPLATES.values() if t.kind == "open"]:
    for _r in REWRITES:
        register(
            dataclasses.replace(
                _t,
                name=rewrite_name(_t.name, _r),
                changes=(*_t.changes, _r),
                description=f"{_t.description}, the instruction rewritten ({_r}; appendix L)",
            )
        )


def rewrite_of(template: str | Template) -> str | None:
    """The appendix L rewrite a template shows (``"paraphrase"``, ``"reorder"``), or None."""
    changes = get_template(template).changes
    found = [c for c in changes if c in REWRITES]
    return found[0] if found else None


def get_template(template: str | Template) -> Template:
    """Look a template up by name (or pass a :class:`Template` through); a name of a
    family in :data:`RESOLVERS` (a format id ``fmt-…``) is built from the name, and so is
    the cloze form ``<name>-cloze`` of any multiple-choice template (:func:`cloze_form`)."""
    if isinstance(template, Template):
        return template
    name = str(template)
    if name not in TEMPLATES and name.endswith(CLOZE_SUFFIX) and len(name) > len(CLOZE_SUFFIX):
        return cloze_form(get_template(name[: -len(CLOZE_SUFFIX)]))
    if template not in TEMPLATES:
        for prefix, resolve in RESOLVERS.items():
            if str(template).startswith(prefix):
                return resolve(str(template))
    if template not in TEMPLATES:
        fail(
            "psens.prompts",
            f"unknown template {template!r}",
            f"Expected one of {sorted(TEMPLATES)} or a Template",
            KeyError,
        )
    return TEMPLATES[template]


register(
    Template(
        "cloze",
        kind="cloze",
        options_header="",
        description=(
            "lm-evaluation-harness's ARC / PIQA / SciQ prompt 'Question: {question}\\nAnswer:'"
            " (PIQA's goal is the question); each option's text is scored as a continuation"
        ),
    )
)
for _name in ("ips1", "ips2", "ips3", "ips4", "ips5"):
    register(cloze_form(_name))


def pair_perturbation(a: str | Template, b: str | Template) -> str:
    """Perturbation kind between two templates (appendix G), from their changes."""
    ta, tb = get_template(a), get_template(b)
    return _kinds(set(ta.changes) ^ set(tb.changes))


# ----------------------------------------------------------------------------- rendering


@dataclass(frozen=True)
class Rendered:
    """A rendered prompt and where the item's fields sit in it.

    ``fields`` maps ``"question"`` and ``"option:<label>"`` to the character offset of
    that field's text in ``text`` (a cloze prompt has no option fields). ``target`` is the
    answer text as it follows the prompt (``" B"``; a cloze prompt: the answer's own text,
    ``" dogs"``; empty for open-ended items).
    """

    text: str
    fields: Mapping[str, int]
    target: str
    template: str


def _layout_block(item: Item, t: Template, start: int) -> tuple[str, dict[str, int]]:
    """``t.layout`` filled from ``item``, with the offsets of its fields."""
    import string

    role_of = {ph: role for role, ph in t.layout_fields}
    values = {"question": item.question, **{f"option:{lab}": txt for lab, txt in item.options}}
    parts: list[str] = []
    fields: dict[str, int] = {}
    pos = start
    for literal, name, _, _ in string.Formatter().parse(t.layout):
        parts.append(literal)
        pos += len(literal)
        if name is not None:
            role = role_of[name]
            fields[role] = pos
            parts.append(values[role])
            pos += len(values[role])
    return "".join(parts), fields


def _block(item: Item, t: Template, start: int) -> tuple[str, dict[str, int]]:
    if t.layout:
        return _layout_block(item, t, start)
    parts: list[str] = []
    fields: dict[str, int] = {}
    pos = start

    def add(s: str) -> None:
        nonlocal pos
        if parts:
            pos += len(t.sep)
        parts.append(s)
        pos += len(s)

    def add_field(fmt: str, key: str, name: str, value: str, **extra: str) -> None:
        before = fmt.split("{" + name + "}", 1)[0].format(**extra)
        offset = pos + (len(t.sep) if parts else 0) + len(before)
        add(fmt.format(**{name: value}, **extra))
        fields[key] = offset

    if t.header:
        add(t.header)
    if item.context and t.context_first:
        add(t.context.format(context=item.context))
    add_field(t.question, "question", "question", item.question)
    if item.context and not t.context_first:
        add(t.context.format(context=item.context))
    if t.kind == "mcq":
        if t.options_header:
            add(t.options_header)
        shown = option_labels(item, t)
        for label, text in item.options:
            add_field(t.option, f"option:{label}", "text", text, label=shown[label])
        if t.instruction:
            add(_fill_instruction(t.instruction, list(shown.values())))
    elif t.instruction:
        add(t.instruction)
    add(t.answer)
    return t.sep.join(parts), fields


def option_labels(item: Item, template: str | Template) -> dict[str, str]:
    """The label each option of ``item`` is shown with (item label -> shown label).

    Refuses a label style with fewer labels than the item has options.
    """
    t = get_template(template)
    own = list(item.labels)
    style = LABEL_STYLES[t.labels]
    if not style:
        return dict(zip(own, own, strict=True))
    if len(own) > len(style):
        fail(
            f"Template {t.name!r}",
            f"labels={t.labels!r} has {len(style)} labels; item {item.id!r} has {len(own)} options",
            'Use labels="A" (letters) or the item\'s own labels for items with many options',
        )
    return dict(zip(own, style, strict=False))


def _fill_instruction(text: str, labels: Sequence[str]) -> str:
    from psens.variants import label_list  # the one list of labels in words

    what = "number" if labels and all(lab.isdigit() for lab in labels) else "letter"
    return text.replace("{labels}", label_list(labels)).replace("{what}", what)


def _check_item(item: Item, t: Template, where: str) -> None:
    if not isinstance(item, Item):
        fail(where, f"item is a {type(item).__name__}", "Pass a psens.datasets.Item", TypeError)
    item.check(where)
    if t.kind == "mcq" and not item.options:
        fail(
            where,
            f"template {t.name!r} is for multiple-choice items but item {item.id!r} has no options",
            "Use the 'open' template for open-ended items",
        )
    if t.kind == "cloze":
        check_cloze_item(item, where)
    labels = tuple(lab for lab, _ in item.options or ())
    if t.layout and labels != t.option_labels:
        fail(
            where,
            f"template {t.name!r} shows the options {', '.join(t.option_labels) or 'none'} but "
            f"item {item.id!r} has {', '.join(labels) or 'none'}",
            f"Use items with exactly these options (a run selects them: {len(t.option_labels)} "
            "options)",
        )


def render_spans(
    item: Item,
    template: str | Template = "ips1",
    *,
    shots: Sequence[Item] = (),
    instruction: str | None = None,
) -> Rendered:
    """Render ``item`` with ``template`` and return the text with its field offsets.

    Few-shot prompts (fig. 16): an instruction line, ``Example:``, the shots each
    rendered with the same template and followed by their answer, then the item. A cloze
    template (lm-eval's few-shot prompt) has no instruction: the shots, each followed by
    its answer's text, and the item, a blank line apart.
    """
    where = "psens.prompts.render"
    t = get_template(template)
    _check_item(item, t, where)
    prefix = ""
    if shots and t.layout:
        for s in shots:
            _check_item(s, t, where)
        _check_shots(item, shots, where)
        slot = " " if t.layout.rstrip().endswith(":") else "\nAnswer: "
        prefix = "".join(_block(s, t, 0)[0] + slot + s.answer + "\n\n" for s in shots)
    elif shots:
        for s in shots:
            _check_item(s, t, where)
        _check_shots(item, shots, where)
        examples = []
        for s in shots:
            text, _ = _block(s, t, 0)
            examples.append(text + t.answer_prefix + _answer_text(s, t))
        if t.kind == "cloze" and instruction is None:
            # lm-eval's few-shot prompt: the examples with their answers' text, "\n\n" apart
            prefix = "\n\n".join(examples) + "\n\n"
        else:
            if instruction is None:
                k = len(item.options)
                instruction = FEW_SHOT_INSTRUCTION.format(n_options=_NUMBER_WORDS.get(k, str(k)))
            prefix = instruction + "\nExample:\n" + "\n\n".join(examples) + "\n\n"
    text, fields = _block(item, t, len(prefix))
    target = t.answer_prefix + _answer_text(item, t) if t.kind != "open" else ""
    return Rendered(prefix + text, fields, target, t.name)


def _check_shots(item: Item, shots: Sequence[Item], where: str) -> None:
    """No shot is the evaluated item or repeats another shot."""
    seen = {item.id, item.question}
    for s in shots:
        if s.id in seen or s.question == item.question:
            fail(
                where,
                f"shot {s.id!r} is the evaluated item (or repeats another shot)",
                "Draw shots from a split disjoint from the evaluated items (select_shots)",
            )
        seen.add(s.id)


def _answer_text(item: Item, t: Template) -> str:
    if t.kind == "cloze":  # the answer's own text
        return dict(item.options)[item.answer]
    return option_labels(item, t)[item.answer] if t.kind == "mcq" else item.answer


def render(
    item: Item,
    template: str | Template = "ips1",
    *,
    shots: Sequence[Item] = (),
    masks: Mapping | None = None,
    mask_text: str = "[MASK]",
    variables_: Sequence[Variable] | None = None,
) -> str:
    """The prompt string for ``item``; the model's answer follows it.

    Parameters
    ----------
    item : Item
    template : str or Template
        ``"ips1"`` … ``"ips5"`` (fig. 15), ``"open"`` (appendix K) or a Template.
    shots : sequence of Item
        In-context examples (fig. 16), 0–3 in the paper.
    masks : int, optional
        A bitmask over the item's variables (bit i set = variable i kept); masked
        variables are shown as ``mask_text``. For display only: the scorer masks
        token ids, not text.
    variables_ : sequence of Variable, optional
        The variables the mask refers to (default :func:`variables` of the item).

    Examples
    --------
    >>> from psens.datasets import Item
    >>> it = Item("x", "Which one does NOT lay eggs?", (("A", "chickens"), ("B", "dogs")), "B")
    >>> print(render(it, "ips1"))
    Question: Which one does NOT lay eggs?
    Answers:
    A.chickens
    B.dogs
    Answer:
    """
    r = render_spans(item, template, shots=shots)
    if masks is None:
        return r.text
    vs = variables(item) if variables_ is None else variables_
    bits = int(masks)
    text = r.text
    for i, (start, end) in sorted(
        enumerate(prompt_spans(r, vs)), key=lambda x: x[1][0], reverse=True
    ):
        if not (bits >> i) & 1:
            text = text[:start] + mask_text + text[end:]
    return text


# ----------------------------------------------------------------------------- few-shot


def _paper_shot(i: int, q: str, opts: Sequence[str], answer: str) -> Item:
    return Item(
        id=f"ips-paper-shot-{i}",
        question=q,
        options=tuple(zip("ABCD", opts, strict=True)),
        answer=answer,
        metadata={"source": "IPS paper, appendix E.6"},
    )


#: The three in-context examples of appendix E.6.
PAPER_SHOTS: tuple[Item, ...] = (
    _paper_shot(
        1,
        "Which type of precipitation consists of frozen rain drops?",
        ("sleet", "hail", "snow", "fog"),
        "A",
    ),
    _paper_shot(
        2,
        "Decayed prehistoric plants have helped in the formation of",
        (
            "coal, shale, and quartz.",
            "coal, oil, and gas.",
            "shale, quartz, and coal.",
            "oil, shale, and granite.",
        ),
        "B",
    ),
    _paper_shot(
        3,
        "Which describes a material that is not a food?",
        (
            "It stores energy but not nutrients.",
            "It does not store energy or nutrients.",
            "It stores energy and nutrients.",
            "It does not store energy but stores nutrients.",
        ),
        "B",
    ),
)


def select_shots(
    pool: Sequence[Item], k: int, *, exclude: Iterable[Item] = (), seed: int = 0
) -> tuple[Item, ...]:
    """Draw ``k`` in-context examples from ``pool``, disjoint from ``exclude``.

    The paper (E.6) draws them at random from data not in the test set; pass a
    different split as ``pool`` and the evaluated items as ``exclude``.
    """
    where = "psens.prompts.select_shots"
    if k == 0:
        return ()
    k = check_positive_int(k, where, "k")
    banned = {(it.id, it.question) for it in exclude}
    ids = {i for i, _ in banned}
    qs = {q for _, q in banned}
    free = [it for it in pool if it.id not in ids and it.question not in qs and it.options]
    if len(free) < k:
        fail(
            where,
            f"only {len(free)} pool items are disjoint from the evaluated ones",
            "Pass a larger pool",
        )
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(free), size=k, replace=False)
    return tuple(free[int(i)] for i in idx)


# ----------------------------------------------------------------------------- variables

#: Hard cap on the number of variables of one item (2**n masked prompts each).
MAX_VARIABLES = 16

#: The rules :func:`variables` knows (the run config key ``variables``): ``"psens"``
#: (default) and ``"paper"`` (the IPS paper's, §3.2 for MCQ and appendix K.2 for open-ended
#: items; docs/paper-conventions.md).
VARIABLE_RULES: tuple[str, ...] = ("psens", "paper")

_WORD = re.compile(r"\w+(?:[-'’.]\w+)*", re.UNICODE)

#: Words kept even though stop-word lists contain them (negations change meaning;
#: the paper's fig. 1 keeps "NOT").
KEEP_WORDS = frozenset({"not", "no", "nor", "never", "none", "except", "least", "most"})

_FALLBACK_STOP = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more my myself of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while
    who whom why will with would you your yours yourself yourselves""".split()
)


def stop_words(keep: Iterable[str] = KEEP_WORDS) -> frozenset[str]:
    """English stop words: the ``stop-words`` package if installed, else a built-in list.

    NLTK's list (used in appendix K.2) downloads at run time, so it is not used.
    The words of ``keep`` (default: the negations and comparatives of :data:`KEEP_WORDS`)
    are removed from the list; ``keep=()`` gives the whole list.
    """
    try:
        from stop_words import get_stop_words

        words = frozenset(w.lower() for w in get_stop_words("en"))
    except Exception:  # any failure of the optional package
        words = _FALLBACK_STOP
    return words - frozenset(keep)


class Variable(str):
    """One input variable: a word or phrase of the question or an option.

    A ``str`` (the word itself, so ``variables(item)`` compares equal to a list of
    words) that also knows where it sits: ``field`` is ``"question"`` or
    ``"option:<label>"``; ``start``/``end`` are character offsets inside that field.
    """

    field: str
    start: int
    end: int

    def __new__(cls, text: str, field: str, start: int, end: int) -> Variable:
        obj = super().__new__(cls, text)
        obj.field, obj.start, obj.end = field, int(start), int(end)
        return obj

    @property
    def text(self) -> str:
        """The word as a plain string."""
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"Variable({self.text!r}, {self.field!r}, {self.start}, {self.end})"

    def __reduce__(self):
        return (Variable, (self.text, self.field, self.start, self.end))


@dataclass(frozen=True)
class _Word:
    text: str
    field: str
    start: int
    end: int
    order: int = field(default=0)


#: Scripts written without spaces between words (Han, Hiragana, Katakana): each character
#: of these is one word. Hangul is written with spaces and keeps its words.
_CJK = re.compile(
    "[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\uff66-\uff9f\U00020000-\U0003134f]"
)


def _word_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of every word of ``text``, found as on its NFC form.

    A combining mark (Unicode category M: accents, vowel signs) belongs to the word it
    follows, so a decomposed ``"Ve\\u0301nus"`` is one word as its NFC form ``"Vénus"`` is;
    offsets are those of ``text`` itself. Characters of :data:`_CJK` scripts are one word
    each (there is no space to split on).
    """
    # marks become a word character of the same length, so the offsets are unchanged
    plain = "".join("a" if unicodedata.category(c)[0] == "M" else c for c in text)
    spans = []
    for m in _WORD.finditer(plain):
        start, end = m.start(), m.start() + len(m.group(0).rstrip("."))
        piece = start
        for c in _CJK.finditer(plain, start, end):
            if c.start() > piece:
                spans.append((piece, c.start()))
            spans.append((c.start(), c.end()))
            piece = c.end()
        if piece < end:
            spans.append((piece, end))
    return spans


def _fields(item: Item, options: bool = True) -> dict[str, str]:
    """The texts whose words can be variables: the question, and the options unless not
    ``options`` (a cloze prompt does not show them)."""
    shown = item.options if options else ()
    return {"question": item.question, **{f"option:{lab}": txt for lab, txt in shown}}


def _segments(item: Item, options: bool = True) -> list[_Word]:
    out: list[_Word] = []
    fields = list(_fields(item, options).items())
    for name, text in fields:
        for start, end in _word_spans(text):
            word = unicodedata.normalize("NFC", text[start:end])
            out.append(_Word(word, name, start, end, len(out)))
    return out


def _phrase_spans(text: str, phrases: Sequence[str]) -> list[tuple[int, int]]:
    spans = []
    for ph in sorted(phrases, key=len, reverse=True):
        ph = ph.strip()
        if not ph:
            continue
        pat = re.compile(r"(?<!\w)" + re.escape(ph) + r"(?!\w)", re.IGNORECASE)
        for m in pat.finditer(text):
            if all(m.end() <= a or m.start() >= b for a, b in spans):
                spans.append((m.start(), m.end()))
    return spans


def _default_phrases(
    words: list[_Word], stops: frozenset[str], text_of: Mapping[str, str]
) -> list[tuple[int, int, str]]:
    """Runs of two or more capitalised non-stop words in one field, separated by spaces
    only (names: "Walter Skinner")."""
    runs: list[tuple[int, int, str]] = []
    cur: list[_Word] = []

    def flush() -> None:
        if len(cur) >= 2:
            runs.append((cur[0].order, cur[-1].order, cur[0].field))
        cur.clear()

    for w in words:
        capital = w.text[:1].isupper() and w.text.lower() not in stops
        first_of_field = w.start == 0 and w.field == "question"
        joined = bool(cur) and cur[-1].field == w.field
        joined = joined and not text_of[w.field][cur[-1].end : w.start].strip()
        if capital and not first_of_field and (not cur or joined):
            cur.append(w)
        else:
            flush()
            if capital and not first_of_field:
                cur.append(w)
    flush()
    return runs


def variables(
    item: Item,
    *,
    n_max: int = 10,
    seed: int = 0,
    stop_words: Iterable[str] | None = None,
    phrases: Sequence[str] | None = None,
    default_phrases: bool = True,
    as_text: bool = False,
    content_only: bool = False,
    max_variables: int = MAX_VARIABLES,
    rule: str = "psens",
    options: bool = True,
) -> list[Variable]:
    """The input variables of ``item`` (words of its question and options).

    Chosen from the item alone, so they are identical for every template and model
    (IPS paper, appendices E.5 and K.2):

    1. segment question and options into words (punctuation is never a variable). Words
       are found as on the NFC-normalised text: a combining accent belongs to its word
       (``"Ve\\u0301nus"`` is the one word ``"Vénus"``); a variable's text is NFC, its
       ``start``/``end`` point into the item's own text. Scripts written without spaces
       (Chinese, Japanese kana and kanji) give one variable per character; Hangul keeps
       its space-separated words;
    2. if there are at most ``n_max`` words, keep them all (short MCQ items, as in
       the paper's fig. 1 where ``NOT`` is a variable);
    3. otherwise merge phrases (``phrases`` given by the user, matched case-insensitively
       inside one field, plus runs of capitalised words when ``default_phrases``), and
       drop stop words (``stop_words``, default :func:`stop_words`);
    4. if more than ``n_max`` remain, keep ``n_max`` chosen by
       ``numpy.random.default_rng(seed)`` (deterministic), in text order.

    ``rule="paper"`` follows the IPS paper instead. A multiple-choice item: every word of
    the question and options is a candidate (§3.2: "we use words in Q ∪ M as input
    variables"; stop words are not dropped and no phrases are merged unless ``phrases``
    are given), and step 4 picks ``n_max`` of them when there are more (the paper gives no
    cap). An open-ended item (appendix K.2): stop words are always dropped, negations
    included (the paper keeps no exceptions; psens's list, not NLTK's), phrases merged,
    then step 4.

    Parameters
    ----------
    n_max : int
        Cap on n (default 10; at most :data:`MAX_VARIABLES`).
    as_text : bool
        Return the words as strings instead of :class:`Variable` objects.
    content_only : bool
        Skip step 2: merge phrases and drop stop words even when there are at most
        ``n_max`` words (all content words of a long input, for sparse interactions).
    max_variables : int
        The cap on ``n_max`` (default :data:`MAX_VARIABLES`, the exact decomposition's);
        sparse interactions (:mod:`psens.ips.sparse`) allow up to 64.
    rule : {"psens", "paper"}
        Which selection (:data:`VARIABLE_RULES`; see above).
    options : bool
        Whether the options' words are candidates (default). False: the question's words
        only, for cloze prompts, which do not show the options (their text is what is
        scored).

    Returns
    -------
    list of Variable (or str)
        Bit i of a mask refers to ``result[i]``.
    """
    where = "psens.prompts.variables"
    n_max = check_positive_int(n_max, where, "n_max")
    if n_max > max_variables:
        fail(
            where,
            f"n_max={n_max} is above the cap of {max_variables} variables "
            f"(2**{n_max} masked prompts per item and template)",
            f"Pass n_max <= {max_variables}",
        )
    if rule not in VARIABLE_RULES:
        fail(where, f"rule={rule!r} is unknown", f"Use one of {list(VARIABLE_RULES)}")
    item.check(where)
    words = _segments(item, options)
    text_of = _fields(item, options)
    paper_mcq = rule == "paper" and item.is_mcq
    if rule == "paper":  # §3.2: every word of an MCQ item; K.2: content words of the rest
        content_only = not item.is_mcq
        default_phrases = default_phrases and not item.is_mcq
    if len(words) <= n_max and not phrases and not content_only:
        chosen = [Variable(w.text, w.field, w.start, w.end) for w in words]
        return [v.text for v in chosen] if as_text else chosen

    if paper_mcq:
        stops: frozenset[str] = frozenset()
    elif stop_words is not None:
        stops = frozenset(s.lower() for s in stop_words)
    else:
        stops = globals()["stop_words"](() if rule == "paper" else KEEP_WORDS)
    # phrases: (field, start, end)
    merged: list[tuple[str, int, int]] = []
    for name, text in text_of.items():
        for a, b in _phrase_spans(text, phrases or ()):
            merged.append((name, a, b))
    if default_phrases:
        by_order = {w.order: w for w in words}
        for first, last, name in _default_phrases(words, stops, text_of):
            a, b = by_order[first].start, by_order[last].end
            if all(f != name or b <= s or a >= e for f, s, e in merged):
                merged.append((name, a, b))
    units: list[Variable] = []
    for name, a, b in merged:
        units.append(Variable(text_of[name][a:b], name, a, b))
    for w in words:
        inside = any(f == w.field and s <= w.start and w.end <= e for f, s, e in merged)
        if inside or w.text.lower() in stops:
            continue
        units.append(Variable(w.text, w.field, w.start, w.end))
    field_rank = {name: i for i, name in enumerate(text_of)}
    units.sort(key=lambda v: (field_rank[v.field], v.start))
    if len(units) > n_max:
        rng = np.random.default_rng(seed)
        keep = np.sort(rng.choice(len(units), size=n_max, replace=False))
        units = [units[int(i)] for i in keep]
    return [v.text for v in units] if as_text else units


def prompt_spans(rendered: Rendered, vs: Sequence[Variable]) -> list[tuple[int, int]]:
    """Character spans of the variables in a rendered prompt."""
    out = []
    for v in vs:
        if v.field not in rendered.fields:
            fail(
                "psens.prompts.prompt_spans",
                f"variable {v.text!r} lives in {v.field!r}, which the template does not render",
                "Compute variables and the prompt from the same item",
            )
        off = rendered.fields[v.field]
        out.append((off + v.start, off + v.end))
    return out
