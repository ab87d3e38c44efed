"""The format grammar: dimensions, formats (points), grammars (subspaces), sampling, neighbours.

A :class:`Format` is one point of the space :data:`DIMENSIONS` (a value for every
dimension); :meth:`Format.template` turns it into a :class:`psens.prompts.Template`, so a
format renders, masks and scores through the one path every template takes. Rendered for
an item, a format reads::

    [role]
    <question name><question separator><question>
    [<options name><separator>]
    <enumeration><enumeration space><option text>      (one per option)
    [instruction]
    <answer cue><separator>

with the parts joined by the ``space`` dimension (a line break, a blank line, a space,
``" || "``), the names cased by ``q_case`` (question) and ``case`` (options name and cue).
The IPS paper's five templates are points (:data:`IPS_POINTS`); the EAS 2^3 design is the
subspace :data:`GRAMMARS`\\ ``["eas"]`` (role line x format directive x answer prefix).

In the cloze formulation (``answer = "cloze"``, :func:`psens.prompts.cloze_form`) a format
renders without its options: the dimensions of :data:`CLOZE_HIDDEN` (options name,
enumeration, the directive that names the labels) do not show, a grammar's cloze version
(:meth:`Grammar.for_answer`) fixes them, and two formats are distinct when their cloze
forms differ (:meth:`Format.spec_key`).

A format's id is readable: ``fmt-`` + its changes from ips1 as ``dimension=value``, comma
separated (``fmt-case=upper,sep=double-colon``; ips1's own point is ``fmt-ips1``), and
:func:`psens.prompts.get_template` resolves it without a registry. Ids of earlier psens
versions (``fmt-`` + one character per dimension, ``fmt-000010000000``) still resolve, and
runs that carry them read with the readable label (:func:`format_label`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from psens._validation import check_positive_int, fail, shown
from psens.prompts import RESOLVERS, Template, cloze_form
from psens.variants import EAS_ROLE

__all__ = [
    "CLOZE_HIDDEN",
    "DIMENSIONS",
    "GRAMMARS",
    "IPS_POINTS",
    "Dimension",
    "Format",
    "Grammar",
    "check_distinct",
    "eas_point",
    "format_label",
    "formats_from_spec",
    "get_grammar",
    "neighbours",
    "sample",
]

#: the characters of earlier ids: one per dimension, the index of its value
_CODES = "0123456789abcdefghijklmnopqrstuvwxyz"
#: the prefix of every format id (:data:`psens.prompts.RESOLVERS`), and the id of ips1's point
PREFIX, BASE_ID = "fmt-", "fmt-ips1"


@dataclass(frozen=True)
class Dimension:
    """One axis of the format space: named values and the text each one renders as."""

    name: str
    values: tuple[tuple[str, str], ...]  # (value name, text)
    description: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(v for v, _ in self.values)

    def text(self, value: str) -> str:
        return dict(self.values)[value]


def _casing(text: str, case: str) -> str:
    return {"title": text, "upper": text.upper(), "lower": text.lower()}[case]


#: Every dimension of the space, in id order (append values only; never reorder).
DIMENSIONS: tuple[Dimension, ...] = (
    Dimension(
        "q_name",
        (("Question", "Question"), ("Q", "Q"), ("Problem", "Problem")),
        "the question's field name (synonyms)",
    ),
    Dimension(
        "q_case",
        (("title", "title"), ("upper", "upper"), ("lower", "lower")),
        "casing of the question's field name",
    ),
    Dimension(
        "q_sep",
        (("colon", ": "), ("double-colon", ":: "), ("dash", " - "), ("newline", ":\n")),
        "separator between the question's field name and its text",
    ),
    Dimension(
        "opt_name",
        (("Answers", "Answers"), ("Options", "Options"), ("Choices", "Choices"), ("none", "")),
        "the options' field name (synonyms; none: no header line)",
    ),
    Dimension(
        "case",
        (("title", "title"), ("upper", "upper"), ("lower", "lower")),
        "casing of the options' field name and the answer cue",
    ),
    Dimension(
        "sep",
        (("colon", ":"), ("double-colon", "::"), ("dash", " -")),
        "separator after the options' field name and the answer cue",
    ),
    Dimension(
        "space",
        (("newline", "\n"), ("blank-line", "\n\n"), ("space", " "), ("bars", " || ")),
        "what joins the fields",
    ),
    Dimension(
        "enum",
        (
            ("A.", "{label}."),
            ("A)", "{label})"),
            ("(A)", "({label})"),
            ("[A]", "[{label}]"),
            ("1.", "{label}."),
            ("a.", "{label}."),
            ("1)", "{label})"),
            ("a)", "{label})"),
        ),
        "option enumeration (letters are the item's own labels)",
    ),
    Dimension(
        "enum_space",
        (("none", ""), ("space", " ")),
        "space between an option's label and its text",
    ),
    Dimension(
        "cue",
        (
            ("Answer", "Answer"),
            ("Correct answer", "Correct answer"),
            ("Solution", "Solution"),
            ("none", ""),
        ),
        "the answer cue (none: the answer starts its own line)",
    ),
    Dimension(
        "role",
        (("none", ""), ("assistant", EAS_ROLE)),
        "a role line before the prompt (EAS factor 'role')",
    ),
    Dimension(
        "directive",
        (
            ("none", ""),
            ("only-label", "Respond with only the {what} of the correct option ({labels})."),
        ),
        "a format directive before the answer cue (EAS factor 'fmt')",
    ),
)
_BY_NAME = {d.name: d for d in DIMENSIONS}
#: The dimensions a cloze prompt does not show (it lists no options and names no labels).
CLOZE_HIDDEN: tuple[str, ...] = ("opt_name", "enum", "enum_space", "directive")
#: label style of each enumeration (:data:`psens.prompts.LABEL_STYLES`)
_ENUM_LABELS = {"1.": "1", "1)": "1", "a.": "a", "a)": "a"}

#: The IPS paper's five MCQ templates (fig. 15) as points (changes from ips1).
IPS_BASE: dict[str, str] = {
    "q_name": "Question",
    "q_case": "title",
    "q_sep": "colon",
    "opt_name": "Answers",
    "case": "title",
    "sep": "colon",
    "space": "newline",
    "enum": "A.",
    "enum_space": "none",
    "cue": "Answer",
    "role": "none",
    "directive": "none",
}
IPS_POINTS: dict[str, dict[str, str]] = {
    "ips1": {},
    "ips2": {"case": "upper"},
    "ips3": {"sep": "double-colon"},
    "ips4": {"case": "upper", "sep": "double-colon"},
    "ips5": {"enum": "A)"},
}
#: the ips1-relative change of :data:`psens.prompts.CHANGE_KINDS` each IPS coordinate is
_IPS_CHANGES = {("case", "upper"): "case", ("sep", "double-colon"): "double-colon"}
_IPS_CHANGES[("enum", "A)")] = "paren-marker"


@dataclass(frozen=True)
class Format:
    """A point of the format space: one value per dimension of :data:`DIMENSIONS`.

    Hashable; ``id`` is a readable, stable string (``fmt-`` + the changes from ips1,
    ``dimension=value``). Build one with :meth:`from_coords` (missing dimensions take the
    ips1 value) or :meth:`from_id`.

    Examples
    --------
    >>> f = Format.from_coords(case="upper", enum="(A)")
    >>> f.coords["case"], f.id
    ('upper', 'fmt-case=upper,enum=(A)')
    >>> Format.from_id(f.id) == f == Format.from_id("fmt-000010020000")  # an earlier id
    True
    >>> Format.from_coords().id
    'fmt-ips1'
    """

    values: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.values) != len(DIMENSIONS):
            fail(
                "psens.formats.Format",
                f"{len(self.values)} values for {len(DIMENSIONS)} dimensions",
                "Build formats with Format.from_coords(...)",
            )
        for d, v in zip(DIMENSIONS, self.values, strict=True):
            if v not in d.names:
                fail(
                    "psens.formats.Format",
                    f"{d.name} = {shown(v)} is not a value of the grammar",
                    f"Use one of {list(d.names)}",
                )

    @classmethod
    def from_coords(cls, coords: Mapping[str, str] | None = None, **kw: str) -> Format:
        """A format from named coordinates; dimensions not given take ips1's value."""
        given = {**(coords or {}), **kw}
        unknown = set(given) - set(_BY_NAME)
        if unknown:
            fail(
                "psens.formats.Format",
                f"unknown dimensions {sorted(unknown)}",
                f"Use dimensions of {[d.name for d in DIMENSIONS]}",
            )
        point = {**IPS_BASE, **{k: str(v) for k, v in given.items()}}
        return cls(tuple(point[d.name] for d in DIMENSIONS))

    @classmethod
    def from_id(cls, fid: str) -> Format:
        """The format of an id made by :attr:`id`, or of an earlier psens's coded id."""
        where = "psens.formats.Format.from_id"
        fid = str(fid)
        body = fid.removeprefix(PREFIX)
        example = f"Use an id like {Format.from_coords(case='upper').id!r} (Format.id)"
        if not fid.startswith(PREFIX) or not body:
            fail(where, f"{shown(fid)} is not a format id", example)
        if fid == BASE_ID:
            return cls.from_coords()
        if "=" not in body:  # an earlier id: the index of each value
            idx = [_CODES.find(c) for c in body]
            if len(idx) != len(DIMENSIONS) or any(
                i < 0 or i >= len(d.values) for i, d in zip(idx, DIMENSIONS, strict=False)
            ):
                fail(where, f"{shown(fid)} is not a format id", example)
            return cls(tuple(d.values[i][0] for i, d in zip(idx, DIMENSIONS, strict=True)))
        coords = {}
        for part in body.split(","):
            name, eq, value = part.partition("=")
            if not eq or name in coords:
                fail(where, f"{shown(fid)} is not a format id ({shown(part)})", example)
            coords[name] = value
        return cls.from_coords(coords)

    @property
    def coords(self) -> dict[str, str]:
        """``{dimension: value}``."""
        return {d.name: v for d, v in zip(DIMENSIONS, self.values, strict=True)}

    @property
    def id(self) -> str:
        """``fmt-`` + the dimensions that differ from ips1 as ``dimension=value`` in
        :data:`DIMENSIONS` order (``fmt-ips1`` for ips1's point)."""
        changed = [f"{k}={v}" for k, v in self.coords.items() if IPS_BASE[k] != v]
        return PREFIX + ",".join(changed) if changed else BASE_ID

    def replace(self, **kw: str) -> Format:
        """This format with some coordinates changed."""
        return Format.from_coords({**self.coords, **kw})

    def differences(self, other: Format) -> list[str]:
        """The dimensions in which two formats differ."""
        pairs = zip(DIMENSIONS, self.values, other.values, strict=True)
        return [d.name for d, a, b in pairs if a != b]

    def problem(self) -> str | None:
        """Why this point renders badly (an empty field), or None."""
        c = self.coords
        space = _BY_NAME["space"].text(c["space"])
        if c["cue"] == "none" and not space.endswith("\n"):
            return (
                f"cue = none with space = {c['space']}: the answer slot renders empty on the "
                "line of the last field"
            )
        return None

    def template(self) -> Template:
        """The :class:`psens.prompts.Template` this format renders as (named by its id)."""
        why = self.problem()
        if why:
            fail(
                f"format {self.id}",
                why,
                "Use a cue, or a space that ends with a line break (newline, blank-line)",
            )
        c = self.coords
        text = {d.name: d.text(c[d.name]) for d in DIMENSIONS}
        q_name = _casing(text["q_name"], c["q_case"])
        opt = _casing(text["opt_name"], c["case"])
        cue = _casing(text["cue"], c["case"])
        labels = _ENUM_LABELS.get(c["enum"], "")
        # tokenizers that split digits read " 1" as " " + "1": the space goes in the cue
        space_in_cue = bool(cue) and labels == "1"
        changes = [_IPS_CHANGES.get((k, v), "format") for k, v in c.items() if IPS_BASE[k] != v]
        return Template(
            self.id,
            question=q_name + text["q_sep"] + "{question}",
            options_header=opt + text["sep"] if opt else "",
            option=text["enum"] + text["enum_space"] + "{text}",
            answer=cue + text["sep"] + (" " if space_in_cue else "") if cue else "",
            answer_prefix=" " if cue and not space_in_cue else "",
            sep=text["space"],
            header=text["role"],
            labels=labels,
            instruction=text["directive"],
            changes=tuple(sorted(set(changes))),
            description=", ".join(f"{k}={v}" for k, v in c.items()),
        )

    def spec_key(self, answer: str = "letter") -> tuple:
        """What the rendering depends on: two formats with one key render identically
        (``answer="cloze"``: in their cloze forms, which show no options)."""
        t = self.template()
        d = (cloze_form(t) if answer == "cloze" else t).to_dict()
        for k in ("name", "changes", "description"):
            d.pop(k)
        return tuple(sorted((k, json.dumps(v, sort_keys=True, default=str)) for k, v in d.items()))

    def __str__(self) -> str:
        return self.id


def check_distinct(
    formats: Sequence[Format], where: str = "psens.formats", answer: str = "letter"
) -> None:
    """Refuse formats that render badly or two formats that render identically (in
    their cloze forms with ``answer="cloze"``)."""
    seen: dict[tuple, Format] = {}
    for f in formats:
        why = f.problem()
        if why:
            fail(where, f"format {f.id} renders an empty field ({why})", "Drop or change it")
        key = f.spec_key(answer)
        if key in seen:
            other = seen[key]
            same = "the same point" if other == f else "identically"
            fail(
                where,
                f"formats {other.id} and {f.id} render {same} (duplicates: {other.differences(f)})",
                "Drop one of them",
            )
        seen[key] = f


@dataclass(frozen=True)
class Grammar:
    """A subspace of the format space: the values each dimension may take.

    Dimensions not listed in ``allowed`` are fixed at ips1's value. The space is the
    product of the allowed values (:attr:`size` points; points that render badly or
    identically to another are skipped by :meth:`sample` and :meth:`neighbours`).

    References
    ----------
    .. [1] Sclar, M., Choi, Y., Tsvetkov, Y., and Suhr, A. "Quantifying Language Models'
       Sensitivity to Spurious Features in Prompt Design or: How I learned to start
       worrying about prompt formatting." ICLR 2024. arXiv:2310.11324.
    """

    name: str
    allowed: tuple[tuple[str, tuple[str, ...]], ...]
    description: str = ""
    answer: str = "letter"

    def for_answer(self, answer: str) -> Grammar:
        """This grammar for an answer formulation: itself for ``"letter"``; for
        ``"cloze"`` the dimensions of :data:`CLOZE_HIDDEN` fixed at ips1's value, and
        points told apart by their cloze forms."""
        if answer != "cloze":
            return self
        import dataclasses

        allowed = tuple((d, v) for d, v in self.allowed if d not in CLOZE_HIDDEN)
        return dataclasses.replace(self, allowed=allowed, answer="cloze")

    def __post_init__(self) -> None:
        for dim, values in self.allowed:
            if dim not in _BY_NAME:
                fail(f"grammar {self.name!r}", f"unknown dimension {dim!r}", "Fix the grammar")
            bad = set(values) - set(_BY_NAME[dim].names)
            if bad or not values:
                fail(
                    f"grammar {self.name!r}",
                    f"{dim} allows {sorted(bad) or 'no values'}",
                    f"Use values of {list(_BY_NAME[dim].names)}",
                )

    @property
    def choices(self) -> dict[str, tuple[str, ...]]:
        """Every dimension's allowed values (one value for the fixed ones)."""
        given = dict(self.allowed)
        return {d.name: tuple(given.get(d.name, (IPS_BASE[d.name],))) for d in DIMENSIONS}

    @property
    def free(self) -> list[str]:
        """The dimensions with more than one value."""
        return [k for k, v in self.choices.items() if len(v) > 1]

    @property
    def size(self) -> int:
        """Points in the space (product of the allowed values)."""
        return math.prod(len(v) for v in self.choices.values())

    def point(self, index: int) -> Format:
        """The ``index``-th point (mixed radix over :attr:`choices`, first dimension slowest)."""
        out = []
        for values in reversed(list(self.choices.values())):
            index, r = divmod(int(index), len(values))
            out.append(values[r])
        return Format(tuple(reversed(out)))

    def contains(self, f: Format) -> bool:
        return all(v in self.choices[k] for k, v in f.coords.items())

    def neighbours(self, f: Format) -> list[Format]:
        """Formats of this grammar one change away from ``f`` (one dimension changed),
        skipping points that render badly or exactly as ``f``."""
        key = f.spec_key(self.answer) if f.problem() is None else None
        out = []
        for dim, values in self.choices.items():
            for v in values:
                if v == f.coords[dim]:
                    continue
                g = f.replace(**{dim: v})
                if g.problem() is None and g.spec_key(self.answer) != key:
                    out.append(g)
        return out

    def sample(
        self,
        k: int,
        seed: int = 0,
        *,
        design: str = "walk",
        usable: Callable[[Format], bool] | None = None,
    ) -> list[Format]:
        """``k`` distinct formats (distinct renderings), reproducible from ``seed``.

        ``usable``: only formats it accepts are drawn (a run passes "every model of the run
        can score it", :func:`psens.formats.tokens.scorable`); where it accepts every
        format, the draw is the one without it.

        ``design="random"`` draws points uniformly without replacement (as FormatSpread
        does); ``design="walk"`` (default) starts at a random point and adds, one at a time,
        a random neighbour of a random format drawn so far, so every format is one change
        away from an earlier one and each dimension gets pairs of formats that differ in it
        alone (what :func:`psens.formats.analysis.dimension_sensitivity` compares).
        """
        where = f"grammar {self.name!r}"
        k = check_positive_int(k, where, "k")
        if design not in ("walk", "random"):
            fail(where, f"design = {shown(design)} is not known", "Use 'walk' or 'random'")
        if k > self.size:
            fail(
                where,
                f"k = {k} is larger than the space ({self.size} formats)",
                f"Use k <= {self.size} or a larger grammar",
            )
        rng = np.random.default_rng(seed)
        chosen: list[Format] = []
        keys: set[tuple] = set()

        verdicts: dict[Format, bool] = {}

        def ok(f: Format) -> bool:
            if usable is None:
                return True
            if f not in verdicts:
                verdicts[f] = bool(usable(f))
            return verdicts[f]

        def take(f: Format) -> bool:
            if f.problem() is not None or f.spec_key(self.answer) in keys or not ok(f):
                return False
            chosen.append(f)
            keys.add(f.spec_key(self.answer))
            return True

        order = rng.permutation(self.size) if self.size <= 1 << 20 else None
        pos = 0

        def next_random() -> Format | None:
            nonlocal pos
            while True:
                if order is None:
                    return self.point(int(rng.integers(self.size)))
                if pos >= len(order):
                    return None
                pos += 1
                f = self.point(int(order[pos - 1]))
                if f.problem() is None and f.spec_key(self.answer) not in keys and ok(f):
                    return f

        first = next_random()
        while first is not None and not take(first):
            first = next_random()
        while len(chosen) < k:
            f = None
            if design == "walk":
                for i in rng.permutation(len(chosen)):
                    near = [
                        g
                        for g in self.neighbours(chosen[int(i)])
                        if g.spec_key(self.answer) not in keys and ok(g)
                    ]
                    if near:
                        f = near[int(rng.integers(len(near)))]
                        break
            else:
                f = next_random()
            if f is None:
                scored = " that every model can score" if usable is not None else ""
                fail(
                    where,
                    f"k = {k} but only {len(chosen)} formats of the space{scored} render "
                    "distinctly",
                    f"Use k <= {len(chosen)} or a larger grammar",
                )
            take(f)
        return chosen


def _grammar(name: str, description: str, **allowed: Iterable[str]) -> Grammar:
    return Grammar(name, tuple((k, tuple(v)) for k, v in allowed.items()), description)


#: The EAS layout on MCQ items: no options header, "A) text" options.
_EAS_FIXED = {"opt_name": ("none",), "enum": ("A)",), "enum_space": ("space",)}

#: Named grammars: ``default`` (a FormatSpread-like space around ips1), ``ips`` (the
#: three binary changes of the IPS templates), ``eas`` (the EAS 2^3 design on MCQ items).
GRAMMARS: dict[str, Grammar] = {
    g.name: g
    for g in (
        _grammar(
            "default",
            "field names, casing, separators, spacing, enumeration and answer cue",
            **{d: _BY_NAME[d].names for d in list(_BY_NAME)[:10]},
        ),
        _grammar(
            "ips",
            "the IPS paper's template changes: case, doubled separators, A) markers",
            case=("title", "upper"),
            sep=("colon", "double-colon"),
            enum=("A.", "A)"),
        ),
        _grammar(
            "eas",
            "the EAS 2^3 design: role line x format directive x answer prefix (MCQ layout)",
            role=("none", "assistant"),
            directive=("none", "only-label"),
            cue=("none", "Answer"),
            **_EAS_FIXED,
        ),
    )
}


def get_grammar(name: str | Grammar) -> Grammar:
    """A grammar by name (or pass one through)."""
    if isinstance(name, Grammar):
        return name
    if not isinstance(name, str) or name not in GRAMMARS:
        fail("psens.formats", f"unknown grammar {shown(name)}", f"Use one of {sorted(GRAMMARS)}")
    return GRAMMARS[name]


def eas_point(template_id: str) -> Format:
    """The format of an EAS template id ``T{role}{fmt}{prefix}`` (:func:`psens.eas_factors`)."""
    from psens.variants import eas_factors

    fac = eas_factors(template_id)
    return Format.from_coords(
        {k: v[0] for k, v in _EAS_FIXED.items()},
        role=("none", "assistant")[fac["role"]],
        directive=("none", "only-label")[fac["fmt"]],
        cue=("none", "Answer")[fac["prefix"]],
    )


def formats_from_spec(
    spec: Mapping | Sequence,
    where: str = "psens.formats",
    answer: str = "letter",
    usable: Callable[[Format], bool] | None = None,
) -> list[Format]:
    """The formats of a run config's ``templates`` value.

    ``{grammar = "default", k = 16, seed = 0[, design = "walk"]}`` samples ``k`` formats
    (only formats ``usable`` accepts, when given: :meth:`Grammar.sample`); a list of tables
    (``[{case = "upper"}, {enum = "(A)"}]``) gives explicit points (missing dimensions take
    ips1's value). Refuses unknown keys, bad points and duplicates.
    ``answer="cloze"`` samples from the grammar's cloze version
    (:meth:`Grammar.for_answer`) and refuses points whose cloze forms coincide.
    """
    if isinstance(spec, Mapping):
        unknown = set(spec) - {"grammar", "k", "seed", "design"}
        if unknown:
            fail(
                where,
                f"'templates' has unknown keys {sorted(unknown)}",
                'Write templates = {grammar = "default", k = 16, seed = 0}',
            )
        if "k" not in spec:
            fail(where, "'templates' samples formats but gives no k", "Add k = 16 (say)")
        seed = spec.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            fail(where, f"'templates' seed = {shown(seed)}", "Use an integer seed >= 0")
        k = spec["k"]
        if isinstance(k, bool) or not isinstance(k, int):
            fail(where, f"'templates' k = {shown(k)}", "Use an integer k >= 2")
        grammar = get_grammar(spec.get("grammar", "default")).for_answer(answer)
        out = grammar.sample(k, seed, design=spec.get("design", "walk"), usable=usable)
    else:
        out = []
        for point in spec:
            if not isinstance(point, Mapping):
                fail(
                    where, f"'templates' lists {shown(point)} among points", "Write each as a table"
                )
            out.append(Format.from_coords(point))
    check_distinct(out, where, answer)
    return out


RESOLVERS[PREFIX] = lambda fid: Format.from_id(fid).template()


def format_label(name: str) -> str:
    """The readable id of a format named by an earlier psens's coded id (``fmt-`` + one
    character per dimension); any other name unchanged.

    Examples
    --------
    >>> format_label("fmt-000010000000"), format_label("ips1")
    ('fmt-case=upper', 'ips1')
    """
    body = str(name).removeprefix(PREFIX)
    if not str(name).startswith(PREFIX) or "=" in body or len(body) != len(DIMENSIONS):
        return str(name)
    try:
        return Format.from_id(str(name)).id
    except ValueError:
        return str(name)


def sample(
    k: int, seed: int = 0, *, grammar: str | Grammar = "default", design: str = "walk"
) -> list[Format]:
    """``k`` distinct formats of ``grammar`` (:meth:`Grammar.sample`)."""
    return get_grammar(grammar).sample(k, seed, design=design)


def neighbours(f: Format | str, *, grammar: str | Grammar = "default") -> list[Format]:
    """The formats of ``grammar`` one change away from ``f`` (a Format or its id)."""
    return get_grammar(grammar).neighbours(f if isinstance(f, Format) else Format.from_id(f))
