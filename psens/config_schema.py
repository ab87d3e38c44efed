"""The keys of every run config, as one table: :data:`FIELDS`; and the one list of the
method runs: :data:`RUN_MODULES`.

Each row (:class:`Field`) names a key, its type, its default, the values it allows (a tuple
of choices or a check function), a one-line doc and the runs it belongs to: ``"ips"`` (an
IPS run, :class:`psens.config.RunConfig`) and the method runs, the keys of
:data:`RUN_MODULES` (``"eas"``, ``"dbsa"``, ``"subjective"``; :mod:`psens.method_runs`).
From the table come the config classes' fields
(:func:`declare`), their defaults (:func:`defaults`), the required keys (:func:`required`),
every per-key refusal (:func:`check_fields`, one line naming the problem and the fix,
:func:`psens._validation.fail`) and the key table of docs/runs.md (:func:`markdown_table`;
``python scripts/config_keys.py`` rewrites it). A key whose checks or default differ
between runs has one row per group of runs. Checks that read several keys are named
functions beside the config classes (:data:`psens.config.CROSS_CHECKS`, each method
config's ``check``).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from psens._validation import check_in_interval, check_positive_int, fail, shown
from psens.models.loading import DTYPE_NAMES  # the one table of dtype names
from psens.prompts import MAX_VARIABLES, VARIABLE_RULES
from psens.settings import (
    ANSWERS,
    CLOZE_NORMS,
    DEFAULT_ANSWER,
    DEFAULT_NORMALIZATION,
    DEFAULT_SOLVER,
    DEFAULT_TAU,
    NORMALIZATIONS,
)

__all__ = [
    "DEVICES",
    "DTYPES",
    "FIELDS",
    "FLOOR_DTYPES",
    "JUDGE_MODES",
    "MAX_BATCH",
    "METHODS",
    "PRESETS",
    "RUNS",
    "RUN_MODULES",
    "SHOT_SOURCES",
    "TEMPLATE_SETS",
    "WHERE",
    "Field",
    "check_field",
    "check_fields",
    "check_unique",
    "declare",
    "defaults",
    "fields_for",
    "markdown_table",
    "parse_scheduler",
    "required",
]

#: where an IPS config's refusals come from
WHERE = "psens config"
#: The one list of the method runs: a method's key (its configs' ``method = "..."``, its
#: run files' ``psens_method`` attr) -> the dotted name of its run module, which declares
#: ``RUN``, a :class:`psens._runfile.MethodRun` (:func:`psens.method_runs.declared` imports
#: it when a run of that method is loaded, run or opened). A method's config keys are its
#: rows of :data:`FIELDS`.
RUN_MODULES: dict[str, str] = {
    "eas": "psens.eas.run",
    "dbsa": "psens.dbsa.run",
    "subjective": "psens.pss.subjective",
}
#: the method runs' keys
RUNS: tuple[str, ...] = tuple(RUN_MODULES)
#: the runs a config describes: an IPS run and the method runs
METHODS: tuple[str, ...] = ("ips", *RUNS)
IPS = ("ips",)
#: the default of a key a config must give (no default: ``None`` in :func:`defaults`)
NO_DEFAULT = dataclasses.MISSING
#: the default of ``method``: the method run's own name
OWN_NAME = "<the run's method>"

#: template set names accepted by ``templates = "<name>"``
TEMPLATE_SETS: dict[str, tuple[str, ...]] = {
    "ips5": ("ips1", "ips2", "ips3", "ips4", "ips5"),
    "paper": ("ips1", "ips2", "ips3", "ips4", "ips5"),
    "fewshot": ("ips1", "ips4"),  # appendix E.6 uses templates 1 and 4
    "open": ("open",),
}
#: ``preset = "<name>"``: the values a preset gives the keys a config does not set itself.
#: ``"paper"`` is the IPS paper's (Qin et al., ICML 2026) setup where psens's defaults
#: differ — the provenance of each value is in docs/paper-conventions.md:
#: ``variables`` (§3.2, appendix K.2), ``dtype`` (appendix E.1: torch.float16),
#: ``shots_from`` (appendix E.6), ``solver`` and ``solver_settings`` (eq. 12 with learnable
#: γ, trained as in the interaction group's public code; only when ``solver`` is not set
#: either), ``normalization`` (§3.2: "all 2^(n+1) interaction effects"). τ = 0.1, the five
#: templates and the mask-token rule are the paper's already and are not listed.
PRESETS: dict[str, dict[str, Any]] = {
    "paper": {
        "variables": "paper",
        "dtype": "float16",
        "shots_from": "paper",
        "solver": "sgd",
        "solver_settings": {"preset": "paper"},
        "normalization": "all",
    },
}
#: ``shots_from`` values
SHOT_SOURCES: tuple[str, ...] = ("dataset", "paper")
#: The largest ``batch_size`` (masked prompts per forward pass) a run accepts.
MAX_BATCH = 2**16
#: ``dtype`` values a run accepts (besides None: float32; ``"auto"``: the checkpoint's)
DTYPES = (*DTYPE_NAMES, "auto")
#: ``noise_floor`` dtype names and their canonical names
FLOOR_DTYPES = {k: v for k, v in DTYPE_NAMES.items() if v != "float32"}
#: ``device`` kinds a run accepts (optionally with an index, ``cuda:1``)
DEVICES = ("cpu", "cuda", "mps", "auto")
#: a subjective PSS run's ``judge_mode`` values
JUDGE_MODES = ("preference", "graded")

Check = Callable[[Any, str, str], None]


@dataclass(frozen=True)
class Field:
    """One config key.

    Parameters
    ----------
    name : str
        The key.
    type : str
        Its annotation in the config class.
    default : Any
        Its default (:data:`NO_DEFAULT`: none, the key is required; a list or dict is copied
        for every config).
    allowed : tuple, callable or None
        The values it takes: a tuple of choices (refused as ``"key = value is not known"``)
        or a check ``(value, key, where) -> None`` that refuses in one line.
    doc : str
        One line (Markdown) for the key table.
    methods : tuple of str
        The runs the row applies to (:data:`METHODS`).
    type_check : callable or None
        A check ``(value, key, where)`` of the value's type, run for every key before any
        ``allowed`` check.
    required : bool
        The key must be given in a config file or dict (:func:`required`).
    """

    name: str
    type: str
    default: Any
    allowed: tuple | Check | None
    doc: str
    methods: tuple[str, ...] = IPS
    type_check: Check | None = None
    required: bool = False

    def default_for(self, method: str) -> Any:
        """The default for ``method`` (a fresh copy of a list or dict)."""
        return method if self.default == OWN_NAME else copy.deepcopy(self.default)


# --------------------------------------------------------------------------- check functions


def wrong_type(key: str, value: Any, expected: str, where: str = WHERE) -> None:
    """Refuse a value of the wrong type (``TypeError``), naming the key and what it takes."""
    fail(
        where,
        f"'{key}' must be {expected}, got {shown(value)} ({type(value).__name__})",
        f"Fix the value of {key}",
        TypeError,
    )


def of_type(types: type | tuple[type, ...], expected: str) -> Check:
    """A type check: ``isinstance(value, types)`` (never a bool), else :func:`wrong_type`."""

    def check(value: Any, key: str, where: str) -> None:
        if isinstance(value, bool) or not isinstance(value, types):
            wrong_type(key, value, expected, where)

    return check


def boolean(value: Any, key: str, where: str) -> None:
    """``true`` or ``false`` (not the string ``"no"``)."""
    if not isinstance(value, bool):
        fail(
            where,
            f"'{key}' must be true or false, got {shown(value)}",
            f"Write {key} = true or {key} = false (without quotes)",
            TypeError,
        )


def nonempty_string(value: Any, key: str, where: str) -> None:
    """A string (or path) with more than blanks."""
    if not isinstance(value, str | os.PathLike) or not str(value).strip():
        wrong_type(key, value, "a non-empty string", where)


def positive(minimum: int = 1) -> Check:
    """An integer ``>= minimum`` (:func:`psens._validation.check_positive_int`)."""

    def check(value: Any, key: str, where: str) -> None:
        check_positive_int(value, where, key, minimum=minimum)

    return check


def inside(low: float, high: float) -> Check:
    """A number in ``(low, high)`` (:func:`psens._validation.check_in_interval`)."""

    def check(value: Any, key: str, where: str) -> None:
        check_in_interval(value, where, key, low, high)

    return check


def one_of(value: Any, key: str, known: tuple, where: str = WHERE) -> None:
    """A string among ``known``."""
    if not isinstance(value, str) or value not in known:
        fail(where, f"{key} = {shown(value)} is not known", f"Use one of {list(known)}")


def refuse_unless(ok: Callable[[Any], bool], fix: str) -> Check:
    """A method run's check: ``"key = value"`` and ``fix`` unless ``ok(value)``."""

    def check(value: Any, key: str, where: str) -> None:
        if not ok(value):
            fail(where, f"{key} = {value!r}", fix)

    return check


def check_unique(values: Any, key: str, where: str = WHERE) -> None:
    """Refuse a list that repeats an entry (a repeated template, sample or shot count)."""
    seen: set = set()
    for x in values:
        try:
            repeated = x in seen
            seen.add(x)
        except TypeError:  # unhashable: the type checks report it
            return
        if repeated:
            fail(where, f"'{key}' lists {shown(x)} twice", f"Remove the duplicate from {key}")


def _models(value: Any, key: str, where: str) -> None:
    if not isinstance(value, list | tuple) or not value:
        fail(
            where,
            f"'models' must be a non-empty list of names or served-model tables, got "
            f"{shown(value)}",
            'Write models = ["name", {name = "...", base_url = "http://...", ...}]',
        )


def _sample_ids(value: Any, key: str, where: str) -> None:
    if isinstance(value, list | tuple):
        if not value:
            fail(where, "'samples' is an empty list", "Give a count or a list of item ids")
        if not all(isinstance(x, str) for x in value):
            fail(
                where,
                f"'samples' lists {shown(value)}; item ids are strings",
                'Quote the ids (samples = ["id1", "id2"]) or give a count (samples = 20)',
            )


def _samples(value: Any, key: str, where: str) -> None:
    if isinstance(value, list | tuple):
        check_unique(value, key, where)
    if isinstance(value, bool) or not isinstance(value, int | list | tuple):
        fail(where, f"'samples' = {shown(value)}", "Give a count or a list of item ids")
    if isinstance(value, int):
        check_positive_int(value, where, key)


def _templates(value: Any, key: str, where: str) -> None:
    if not isinstance(value, str | list | tuple | dict) or (
        isinstance(value, list | tuple)
        and not (all(isinstance(x, str) for x in value) or all(isinstance(x, dict) for x in value))
    ):
        wrong_type(
            key,
            value,
            'a set name ("ips5"), a list of template names, a format space '
            '({grammar = "default", k = 16, seed = 0}) or a list of format points',
            where,
        )


def _shots(value: Any, key: str, where: str) -> None:
    check_unique(value, key, where)
    if not value or any(not isinstance(k, int) or k < 0 for k in value):
        fail(where, f"'shots' = {shown(value)}", "Use a list of shot counts like [0, 1, 3]")


def _n_vars(value: Any, key: str, where: str) -> None:
    check_positive_int(value, where, key, minimum=0)  # 0: predictions only
    if value > MAX_VARIABLES:
        fail(
            where,
            f"n_vars = {value} exceeds the cap {MAX_VARIABLES} "
            f"(2**{value} masked prompts per item and template)",
            f"Use n_vars <= {MAX_VARIABLES}, or the sparse path for longer inputs "
            "(psens.ips.sparse, n up to 64)",
        )


def _solver(value: Any, key: str, where: str) -> None:
    expected = 'a solver name or a list like ["canonical", "sgd"]'
    if isinstance(value, list | tuple):
        if not value or not all(isinstance(m, str) for m in value):
            wrong_type(key, value, expected, where)
        check_unique(value, key, where)
    elif not isinstance(value, str):
        wrong_type(key, value, expected, where)


def _seed(value: Any, key: str, where: str) -> None:
    if value < 0:
        fail(where, f"seed = {value} is negative", "Use a seed >= 0")


def _device(value: Any, key: str, where: str) -> None:
    """``cpu``, ``mps``, ``cuda`` or ``cuda:N`` (availability is checked when loading)."""
    kind, _, index = value.partition(":")
    if not (kind in DEVICES and (not index or (kind == "cuda" and index.isdigit()))):
        fail(
            where,
            f"device = {shown(value)} is not known",
            "Use 'cpu', 'cuda', 'cuda:N', 'mps' or 'auto'",
        )


def _batch_size(value: Any, key: str, where: str) -> None:
    if value == "auto":
        return
    check_positive_int(value, where, key)
    if value > MAX_BATCH:
        fail(
            where,
            f"batch_size = {value} is above {MAX_BATCH} masked prompts per "
            "forward pass (their activations would not fit in memory)",
            f"Use batch_size <= {MAX_BATCH} (default 32)",
        )


def _mask_tokens(value: Any, key: str, where: str) -> None:
    if not isinstance(value, dict):
        wrong_type(key, value, "a table (a mapping)", where)
    if not all(isinstance(v, str) for v in value.values()):
        wrong_type(key, value, "a table of model = token strings", where)


def _cache_dir(value: Any, key: str, where: str) -> None:
    folder = Path(value).expanduser()
    if folder.exists() and not folder.is_dir():
        fail(
            where,
            f"cache_dir = {shown(value)} is a file, not a folder",
            "Point cache_dir at a folder (it is created if missing)",
        )


def _noise_floor(value: Any, key: str, where: str) -> None:
    if not isinstance(value, bool | str) or (isinstance(value, str) and value not in FLOOR_DTYPES):
        fail(
            where,
            f"noise_floor = {shown(value)} is not a half-precision dtype",
            f"Use noise_floor = false, true (bfloat16) or one of {sorted(set(FLOOR_DTYPES))}",
        )


def parse_scheduler(scheduler: str) -> tuple[str, Any]:
    """The one reading of ``scheduler``: ``("cuda", None)``, ``("local", N)`` for
    ``local:N`` (1 <= N <= this machine's cores) or ``("tcp", (host, port))`` for
    ``tcp://host:port``; anything else is refused in one line (whether dask-cuda and a GPU
    are there, and whether a ``tcp://`` address is a dask scheduler, is checked before the
    run, :func:`psens.runner.check_scheduler`).

    Examples
    --------
    >>> parse_scheduler("local:1"), parse_scheduler("tcp://10.0.0.5:8786")
    (('local', 1), ('tcp', ('10.0.0.5', 8786)))
    """
    s = str(scheduler)
    if s == "cuda":
        return "cuda", None
    local = re.fullmatch(r"local:([0-9]+)", s)
    if local:
        n, cores = int(local.group(1)), os.cpu_count() or 1
        if 1 <= n <= cores:
            return "local", n
        fail(
            WHERE,
            f"scheduler = {shown(s)} asks for {n} worker processes; this machine has {cores} cores",
            f"Use 'local:N' with 1 <= N <= {cores}",
        )
    tcp = re.fullmatch(r"tcp://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})", s)
    if tcp and 0 < int(tcp.group(2)) < 65536:
        return "tcp", (tcp.group(1).strip("[]"), int(tcp.group(2)))
    fail(
        WHERE,
        f"scheduler = {shown(s)} is not a scheduler address",
        "Use 'local:N' (N worker processes), 'cuda' (one worker per GPU) or 'tcp://host:port'",
    )
    raise AssertionError  # unreachable


def _scheduler(value: Any, key: str, where: str) -> None:
    parse_scheduler(value)


def _run_file(value: Any, key: str, where: str) -> None:
    if not isinstance(value, str | os.PathLike) or not str(value).strip():
        fail(where, f"store = {value!r}", 'Give the netCDF file to write, e.g. store = "runs/x.nc"')
    if Path(value).suffix != ".nc":
        fail(where, f"store = {str(value)!r} is not a .nc file", "End the path in .nc")


def _model_names(value: Any, key: str, where: str) -> None:
    if (
        not isinstance(value, list | tuple)
        or not value
        or not all(isinstance(m, str) and m.strip() for m in value)
    ):
        fail(where, f"models = {value!r}", 'Write models = ["smollm2-135m-instruct", ...]')
    if len(set(value)) != len(value):
        fail(where, "'models' lists a model twice", "Remove the duplicate")


def _datasets(value: Any, key: str, where: str) -> None:
    """A non-empty list of distinct dataset names :func:`psens.datasets.load` knows."""
    from psens.datasets import canonical_name

    if (
        not isinstance(value, list | tuple)
        or not value
        or not all(isinstance(n, str) for n in value)
    ):
        fail(where, f"datasets = {value!r}", 'Write datasets = ["arc-challenge", "boolq", "squad"]')
    if len(set(value)) != len(value):
        fail(where, "'datasets' lists a dataset twice", "Remove the duplicate")
    for name in value:
        canonical_name(name)


def _existing_path(value: Any, key: str, where: str) -> None:
    if not isinstance(value, str):
        fail(where, f"{key} = {value!r}", f"Give {key} as a path string")
    if value and not Path(value).exists():
        fail(where, f"{key} = {value!r} does not exist", "Check the path")


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _seconds(t: Any) -> bool:
    return not isinstance(t, bool) and isinstance(t, int | float) and 0 < t < math.inf


def _either(names: tuple[str, ...]) -> str:
    """``"a"``, ``"b"`` or ``"c"`` as Markdown code.

    Examples
    --------
    >>> print(_either(("eas", "dbsa", "subjective")))
    `"eas"`, `"dbsa"` or `"subjective"`
    """
    quoted = [f'`"{n}"`' for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


_string = of_type((str, os.PathLike), "a string")
_table = of_type(dict, "a table (a mapping)")
_positive = positive()


# --------------------------------------------------------------------------- the table

F = Field
# fmt: off
#: every key of every run config, in the order of the config classes' fields
FIELDS: tuple[Field, ...] = (
    # ---- an IPS run (psens.config.RunConfig)
    F("store", "str", NO_DEFAULT, None, "path of the zarr store to write",
      type_check=nonempty_string, required=True),
    F("models", "list[str | dict[str, Any]]", NO_DEFAULT, None,
      "list of models: packaged short names (`smollm2-135m-instruct`), names of the model "
      "table (`data/models.csv`), hub ids, folders or GGUF files, or served models "
      "`{name, base_url, model, tokenizer[, endpoints, ...]}` (`psens.models.served`)",
      type_check=_models, required=True),
    F("dataset", "str", NO_DEFAULT, None,
      "`arc-challenge`, `arc-easy`, `mmlu[:subject]`, `commonsenseqa`, `boolq`, `piqa`, "
      "`sciq`, `hellaswag`, `openbookqa`, `copa`, `squad`, `dolly` (`psens.datasets.load`)",
      type_check=nonempty_string, required=True),
    F("split", "str | None", None, None, "dataset split (default: the dataset's default)",
      type_check=_string),
    F("dataset_path", "str | None", None, None,
      "a local copy of the dataset (jsonl/parquet/save_to_disk)", type_check=_string),
    F("samples", "int | list[str]", 20, _samples,
      "how many items (a seeded random choice, kept in dataset order) or a list of item ids",
      type_check=_sample_ids),
    F("templates", "str | list[str] | dict[str, Any] | list[dict[str, Any]]", "ips5", None,
      'a set name (`"ips5"`: the paper\'s five, `"fewshot"`: templates 1 and 4, `"open"`; '
      '`"prosa"`: ProSA\'s twelve published prompts of the dataset, `psens.pss.published`) '
      'or a list of template names; or a format space: `{grammar = "default", k = 16, '
      'seed = 0}` samples k formats, a list of tables (`[{case = "upper"}, {enum = '
      '"(A)"}]`) gives explicit points (`psens.formats`; each format\'s coordinates are '
      "stored along `template`)",
      type_check=_templates),
    F("shots", "list[int] | None", None, _shots,
      "few-shot settings, e.g. `[0, 1, 2, 3]` (adds a `shot` dim; default none)",
      type_check=of_type((list, tuple), "a list of shot counts like [0, 1, 3]")),
    F("n_vars", "int", 10, _n_vars,
      "cap on input variables per item; `0`: no masked prompts and no interactions, only "
      "the greedy answer, its correctness and the decoding confidence per template (the "
      "ProSA/PSS design, `psens.pss.runs`)"),
    F("tau", "float", DEFAULT_TAU, inside(0.0, 1.0), "salience threshold",
      type_check=of_type((int, float), "a number")),
    F("solver", "str | list[str]", DEFAULT_SOLVER, None,
      '`"canonical"` (the least-norm optimum), `"exact"` or `"sgd"`; or a list of them '
      '(`["canonical", "sgd"]`): every solver\'s interactions are stored, along a `solver` '
      "dim (readers default to the first)",
      type_check=_solver),
    F("solver_settings", "dict[str, Any]", {}, None,
      "`psens.interactions.SolverSettings` fields (steps, lr, ...); with a list of solvers, "
      '`preset` applies to `"sgd"` only',
      type_check=_table),
    F("seed", "int", 0, _seed, "seed for sample, variable and shot choices",
      type_check=of_type(int, "an integer")),
    F("device", "str", "cpu", _device,
      '`"cpu"`, `"cuda"`, `"cuda:N"`, `"mps"` or `"auto"`: `device_map="auto"` '
      "(accelerate) shards each model over the GPUs (a model larger than one GPU; the CPU "
      "without a GPU)",
      type_check=of_type(str, "a string")),
    F("dtype", "str | None", None, DTYPES,
      'float32 (default), or `"auto"`: the checkpoint\'s own dtype (its `config.json`; '
      "float32 for GGUF models); the dtype each model is loaded in is stored in the attr "
      "`loading`",
      type_check=_string),
    F("batch_size", "int | str", 32, _batch_size,
      "masked prompts per forward pass (fixed so runs are identical); `\"auto\"`: the "
      "largest batch whose weights and keys/values fit half the device's free memory "
      "(`psens.models.hardware.largest_batch`), at most the masked prompts of one prompt, "
      "stored in the attr `batch_size`; refused on a device that reports no free memory "
      "(`mps`)"),
    F("trust_remote_code", "bool", False, None,
      "run a model's own code from its folder or hub repository (always passed to "
      "transformers, so it never asks on the terminal)",
      type_check=boolean),
    F("allow_code_execution", "bool", False, None,
      "run the code a model generates for a code item (HumanEval) to score it (a "
      "`humaneval` run that generates text is refused without it), in a sandbox "
      "(`psens.pss.sandbox`: bubblewrap without network; where it cannot run, only an "
      "audit-hook guard, which is not a security boundary and is warned about); it passes "
      "when its results equal the canonical solution's; `max_new_tokens` must leave room "
      "for a function body",
      type_check=boolean),
    F("threads", "int | None", None, _positive, "torch CPU threads (default: torch's own)"),
    F("mask_tokens", "dict[str, str]", {}, None,
      "per-model mask-token overrides, `{model: token}`, keyed by the names in `models`",
      type_check=_mask_tokens),
    F("generate", "bool", True, None, "store the greedy generated text", type_check=boolean),
    F("max_new_tokens", "int", 8, _positive, "length of the generated text"),
    F("scheduler", "str | None", None, _scheduler,
      '`None` (serial), `"local:N"` (dask LocalCluster, N at most the cores), `"cuda"` '
      "(one dask worker per GPU: dask-cuda's LocalCUDACluster) or `\"tcp://host:port\"` (a "
      "dask scheduler: it must answer dask's handshake within 5 s)",
      type_check=_string),
    F("cache_dir", "str | None", None, _cache_dir,
      "where GGUF models are converted (default `~/.cache/psens/models`)",
      type_check=_string),
    F("noise_floor", "bool | str", False, _noise_floor,
      '`true` (= `"bfloat16"`) or a half-precision dtype (`"bfloat16"`, `"float16"`): score '
      "every masked prompt a second time with the model loaded in that dtype and store "
      "`v_floor` and the measured noise floor `floor` (`psens.ips.floor.noise_floor`)"),
    F("perturbations", "str | None", None, None,
      "a JSON file of paraphrased and reordered instructions (IPS paper, appendix L; "
      "`psens.perturbations`): the run's items are its items and every template is also "
      'shown with each rewrite (`"open:paraphrase"`, `"open:reorder"`)',
      type_check=of_type((str, os.PathLike), "a path to a JSON file")),
    F("variables", "str", "psens", VARIABLE_RULES,
      'which words become input variables: `"paper"`: every word of an MCQ item (§3.2), '
      "K.2's content words of an open-ended one (`psens.prompts.variables`)"),
    F("shots_from", "str", "dataset", SHOT_SOURCES,
      'where few-shot examples come from: `"dataset"` (one seeded draw, disjoint from the '
      'items) or `"paper"` (the three examples of appendix E.6 for MCQ items, shots <= 3)'),
    F("normalization", "str", DEFAULT_NORMALIZATION, NORMALIZATIONS,
      'what the min-max normalisation of a game spans: `"nonempty"` (S ≠ ∅, v(∅) is the '
      'bias) or `"all"` (all 2^(n+1) effects; `psens.ips.metric.normalize`)'),
    F("answer", "str", DEFAULT_ANSWER, ANSWERS,
      '`"letter"`: the letter of the correct option after a listing of the options (the IPS '
      'paper\'s); `"cloze"`: the templates\' cloze forms, each option\'s text scored as a '
      "continuation (`psens.cloze`, docs/answer-formulations.md)"),
    F("cloze_norm", "str | None", None, CLOZE_NORMS,
      'a cloze run\'s normalisation of the options\' log-likelihoods: `"char"` (default: per '
      'byte, lm-eval `acc_norm`), `"token"` (mean per token) or `"sum"` (lm-eval `acc`); '
      "`psens.cloze.rescore` gives the others without a model"),
    F("preset", "str | None", None, tuple(PRESETS),
      '`"paper"`: the IPS paper\'s own choices (`psens.config.PRESETS`) for every key the '
      "config does not set itself (explicit keys win); recorded in the store attrs; "
      "docs/paper-conventions.md lists each choice"),
    # ---- the method runs (psens.method_runs: EAS, DBSA, subjective PSS)
    F("store", "str", "", _run_file, "the netCDF file to write", methods=RUNS, required=True),
    F("models", "list[str]", [], _model_names,
      "local models (packaged names, table names, paths)", methods=RUNS, required=True),
    F("judge", "str", "", refuse_unless(
        lambda j: isinstance(j, str) and bool(j.strip()),
        'Name the judge, e.g. judge = "smollm2-135m-instruct"'),
      "the model that judges every response: a local model, or the served model's name "
      "with `judge_url`", methods=("eas", "subjective"),
      required=True),
    F("judge_url", "str", "", refuse_unless(
        lambda u: isinstance(u, str) and (not u or u.startswith(("http://", "https://"))),
        'Write e.g. judge_url = "http://127.0.0.1:8080/v1"'),
      "an OpenAI-compatible server root (`http://host:port/v1`); empty: the local model "
      "`judge` in this process",
      methods=("subjective",)),
    F("judge_timeout", "float", 60.0,
      refuse_unless(_seconds, "Give a positive number of seconds, e.g. 120"),
      "seconds allowed for each network step of a call to the served judge (connecting, "
      "each write, each read; the whole call gets three times as long), `judge_url` only",
      methods=("subjective",)),
    F("judge_mode", "str", "preference",
      refuse_unless(lambda m: m in JUDGE_MODES, f"Use one of {list(JUDGE_MODES)}"),
      '`"preference"` (yes/no against the reference) or `"graded"` (0-10)',
      methods=("subjective",)),
    F("benchmark", "str", "alpaca",
      refuse_unless(lambda b: b in ("alpaca", "arena"), 'Use "alpaca" or "arena"'),
      '`"alpaca"` (AlpacaEval) or `"arena"` (Arena Hard Auto)',
      methods=("subjective",)),
    F("versions", "str", "", _existing_path,
      "the folder of ProSA's version files (default: `data/reference/prosa`)",
      methods=("subjective",)),
    F("references", "str", "", _existing_path,
      "a JSON/JSONL file of reference answers, records with `instance` (or "
      "`question_id`) and `answer` (or `output`); default for `alpaca`: AlpacaEval's "
      "GPT-4-1106-preview baseline answers, matched on the original text; `arena` has none "
      "offline and needs this key", methods=("subjective",)),
    F("datasets", "list[str]", ["arc-challenge", "boolq", "squad"], _datasets,
      "datasets of the design (the three tasks of the EAS study), each at its default split",
      methods=("eas",)),
    F("prompts", "str", "", None,
      'a JSON file `{"texts": {name: text}, "neighbours": {word: [words]}}`',
      methods=("dbsa",), required=True),
    F("texts", "list[str] | None", None, None,
      "names of the texts to run (default: all of the file)", methods=("dbsa",)),
    F("n", "int", 8, positive(2), "answers to the original prompt", methods=("dbsa",)),
    F("m", "int", 8, positive(2), "answers to each perturbed prompt", methods=("dbsa",)),
    F("k", "int", 2, _positive, "neighbours per word", methods=("dbsa",)),
    F("max_tokens", "int", 24, _positive, "answer length", methods=("dbsa",)),
    F("temperature", "float", 1.0, inside(0.0, 10.0), "sampling temperature (the paper's)",
      methods=("dbsa",)),
    F("permutations", "int", 500, _positive, "permutations per test", methods=("dbsa",)),
    F("samples", "int", 8, _positive,
      "items per dataset: a seeded random choice kept in dataset order", methods=("eas",)),
    F("samples", "int", 12, _positive,
      "instructions: a seeded random choice kept in benchmark order",
      methods=("subjective",)),
    F("seed", "int", 0, refuse_unless(_is_int, "Use an integer seed"),
      "seed of the item choice, sampling and permutations", methods=RUNS),
    F("max_new_tokens", "int", 24, _positive, "answer length", methods=("eas",)),
    F("max_new_tokens", "int", 64, _positive, "response length", methods=("subjective",)),
    F("judge_max_new_tokens", "int", 10, _positive, "verdict length", methods=("eas",)),
    F("judge_max_new_tokens", "int", 6, _positive, "verdict length", methods=("subjective",)),
    F("max_reference_chars", "int", 600, _positive,
      "the reference answer shown to the judge is cut to this many characters",
      methods=("subjective",)),
    F("batch_size", "int", 8, _positive, "prompts per generation batch",
      methods=("eas", "subjective")),
    F("batch_size", "int", 16, _positive, "answers per generation batch", methods=("dbsa",)),
    F("threads", "int | None", None, _positive, "torch CPU threads (default: torch's own)",
      methods=RUNS),
    F("method", "str", OWN_NAME, None,
      f"{_either(RUNS)} (a config without it is an IPS run)",
      methods=RUNS),
)
# fmt: on
del F


# --------------------------------------------------------------------------- derived


@functools.cache
def fields_for(method: str) -> tuple[Field, ...]:
    """The rows of ``method``'s config, in field order."""
    if method not in METHODS:
        raise ValueError(f"unknown run {method!r}; the runs are {METHODS}")
    return tuple(f for f in FIELDS if method in f.methods)


def defaults(method: str = "ips") -> dict[str, Any]:
    """Every key's default for ``method`` (``None`` for a key without one).

    Examples
    --------
    >>> defaults()["tau"], defaults("dbsa")["batch_size"], defaults("eas")["method"]
    (0.1, 16, 'eas')
    """
    return {
        f.name: None if f.default is NO_DEFAULT else f.default_for(method)
        for f in fields_for(method)
    }


def required(method: str = "ips") -> tuple[str, ...]:
    """The keys a config of ``method`` must give."""
    return tuple(f.name for f in fields_for(method) if f.required)


def declare(method: str) -> Callable[[type], type]:
    """A class decorator: the class becomes a dataclass whose fields are ``method``'s rows
    (their annotations and defaults; a list or dict default copied for every instance)."""

    def wrap(cls: type) -> type:
        annotations = {}
        for f in fields_for(method):
            annotations[f.name] = f.type
            if f.default is NO_DEFAULT:
                continue
            if isinstance(f.default, list | dict):
                value = dataclasses.field(default_factory=functools.partial(f.default_for, method))
            else:
                value = f.default_for(method)
            setattr(cls, f.name, value)
        cls.__annotations__ = annotations
        return dataclass(cls)

    return wrap


def _run(check: tuple | Check, value: Any, key: str, where: str) -> None:
    if isinstance(check, tuple):
        one_of(value, key, check, where)
    else:
        check(value, key, where)


def check_field(name: str, value: Any, method: str = "ips", where: str = WHERE) -> None:
    """Refuse ``value`` of the key ``name`` when its row's type or allowed values refuse it."""
    (row,) = (f for f in fields_for(method) if f.name == name)
    if value is None and row.default is None:
        return
    for check in (row.type_check, row.allowed):
        if check is not None:
            _run(check, value, name, where)


def check_fields(cfg: Any, method: str = "ips", where: str = WHERE) -> None:
    """Refuse the first value of ``cfg`` its row refuses: every key's type, then every key's
    allowed values, in field order (a key left at a default of ``None`` is not checked)."""
    rows = [
        f for f in fields_for(method) if getattr(cfg, f.name) is not None or f.default is not None
    ]
    for f in rows:
        if f.type_check is not None:
            f.type_check(getattr(cfg, f.name), f.name, where)
    for f in rows:
        if f.allowed is not None:
            _run(f.allowed, getattr(cfg, f.name), f.name, where)


# --------------------------------------------------------------------------- docs


def _default_text(f: Field) -> str:
    if f.default is NO_DEFAULT:
        return "required"
    if f.default == OWN_NAME:
        return "the method"
    if f.default is None:
        return "none"
    text = repr(f.default).replace("'", '"') if not isinstance(f.default, bool) else ""
    return f"`{text or str(f.default).lower()}`"


def markdown_table() -> str:
    """The key table of docs/runs.md: one line per row of :data:`FIELDS`."""
    lines = ["| key | runs | default | meaning |", "| --- | --- | --- | --- |"]
    for f in FIELDS:
        doc = f.doc
        if isinstance(f.allowed, tuple):
            doc += "; one of " + ", ".join(f"`{v}`" for v in f.allowed)
        runs = "all" if f.methods == METHODS else ", ".join(f.methods)
        doc = doc.replace("|", "\\|")
        lines.append(f"| `{f.name}` | {runs} | {_default_text(f)} | {doc} |")
    return "\n".join(lines)
