"""A run's settings, read back from its attrs in one place.

A run records what its numbers were made with as store attributes: the salience threshold
``tau``, each AND-OR solver's settings (``solver_*``; with several solvers also
``solvers``), its precision (the config's ``dtype``), the dtype of its noise-floor
scoring (``noise_floor``), which interactions the min-max normalisation spans
(``normalization``) and the answer formulation (``answer``, ``cloze_norm``; absent:
letters). :func:`run_settings` is the one reader of those attributes:
the summary, the report, the noise floor, the metrics, the widgets and the notebooks ask
it instead of reading attrs with their own defaults, so a run made at τ = 0.2 is shown at
τ = 0.2 everywhere.

Examples
--------
>>> import psens
>>> ds = psens.synthetic.synthetic_run(n_samples=2, seed=0)
>>> s = run_settings(ds)
>>> s.tau, s.solver, s.dtype, s.normalization, s.answer
(0.1, 'canonical', 'float32', 'nonempty', 'letter')
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from psens.interactions.and_or import DEFAULT_SOLVER, SolverSettings

__all__ = [
    "ANSWERS",
    "CLOZE_NORMS",
    "DEFAULT_ANSWER",
    "DEFAULT_CLOZE_NORM",
    "DEFAULT_NORMALIZATION",
    "DEFAULT_SOLVER",
    "DEFAULT_TAU",
    "NORMALIZATIONS",
    "RunSettings",
    "run_config",
    "run_settings",
    "tau_of",
]

#: the salience threshold of a run that names none (IPS paper §3.2: τ = 0.1)
DEFAULT_TAU: float = 0.1

#: What the min-max normalisation of a game spans (:func:`psens.ips.metric.normalize`):
#: ``"nonempty"`` (psens's default) the AND and OR interactions with S ≠ ∅, the empty set
#: being the bias v(∅) and never an interaction; ``"all"`` the IPS paper's literal reading
#: of §3.2 — Min and Max over "all 2^(n+1) interaction effects", I_and(∅) and I_or(∅)
#: included, which then also count in the salient sets of eq. 3 (docs/paper-conventions.md).
NORMALIZATIONS: tuple[str, ...] = ("nonempty", "all")
DEFAULT_NORMALIZATION: str = "nonempty"

#: The answer formulations of a run (config key ``answer``): the letter of the correct option
#: after a listing of the options (MCF, the IPS paper's), or each option's text scored as a
#: continuation (CF, :mod:`psens.cloze`).
ANSWERS: tuple[str, ...] = ("letter", "cloze")
DEFAULT_ANSWER: str = "letter"

#: The normalisations of a cloze run's option log-likelihoods (config key ``cloze_norm``,
#: :func:`psens.cloze.option_scores`): per byte of the option's text (lm-eval ``acc_norm``),
#: per token, or none (lm-eval ``acc``).
CLOZE_NORMS: tuple[str, ...] = ("sum", "token", "char")
DEFAULT_CLOZE_NORM: str = "char"


@dataclass(frozen=True)
class RunSettings:
    """What a run's numbers were made with.

    Attributes
    ----------
    tau : float
        Salience threshold on normalised interactions.
    solvers : tuple of str
        The AND-OR solvers whose interactions the run holds (the first is shown by
        default).
    solver_settings : dict of str to SolverSettings
        Each solver's settings, as recorded.
    dtype : str
        The precision the models were scored in (``"float32"`` unless the config said).
    noise_floor : str or None
        The dtype of the second, noise-floor scoring (None: the run has none).
    normalization : str
        What the min-max normalisation spans (:data:`NORMALIZATIONS`; runs that record
        none: ``"nonempty"``).
    answer : str
        The answer formulation (:data:`psens.cloze.ANSWERS`): ``"letter"`` (runs that
        record none) or ``"cloze"``.
    cloze_norm : str
        A cloze run's normalisation of the options' log-likelihoods
        (:data:`psens.cloze.CLOZE_NORMS`); letter runs: the default, unused.
    """

    tau: float = DEFAULT_TAU
    solvers: tuple[str, ...] = (DEFAULT_SOLVER,)
    solver_settings: Mapping[str, SolverSettings] = dataclasses.field(default_factory=dict)
    dtype: str = "float32"
    noise_floor: str | None = None
    normalization: str = DEFAULT_NORMALIZATION
    answer: str = DEFAULT_ANSWER
    cloze_norm: str = DEFAULT_CLOZE_NORM

    @property
    def solver(self) -> str:
        """The run's first (default) solver."""
        return self.solvers[0]

    def settings(self, solver: str | None = None) -> SolverSettings:
        """The settings of ``solver`` (default: the first); a solver the run did not
        record gets the recorded settings every solver shares (``qthres``, ``tol``)."""
        solver = self.solver if solver is None else solver
        if solver in self.solver_settings:
            return self.solver_settings[solver]
        first = self.solver_settings.get(self.solver)
        return SolverSettings.from_attrs(first.to_attrs() if first else {}, method=solver)

    def and_or_kwargs(self, solver: str | None = None) -> dict[str, Any]:
        """The keyword arguments that :func:`psens.interactions.and_or` takes to repeat the
        run's split with ``solver`` (everything but the method)."""
        out = dataclasses.asdict(self.settings(solver))
        out.pop("method")
        return {k: v for k, v in out.items() if v is not None}


def _json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def run_config(ds_or_attrs: Any) -> dict[str, Any]:
    """The config a run was made with (its ``config`` attr, as written by :func:`psens.run`),
    ``{}`` when it has none or it does not parse.

    Examples
    --------
    >>> run_config({"config": '{"dataset": "arc-challenge"}'})
    {'dataset': 'arc-challenge'}
    """
    attrs = getattr(ds_or_attrs, "attrs", ds_or_attrs)
    attrs = attrs if isinstance(attrs, Mapping) else {}
    config = _json(attrs.get("config"))
    return dict(config) if isinstance(config, Mapping) else {}


def run_settings(ds_or_attrs: Any) -> RunSettings:
    """The settings a run was made with, read from its attrs (defaults where it has none).

    Parameters
    ----------
    ds_or_attrs : xarray.Dataset, xarray.DataArray or mapping
        A run (or a slice of one, or a table carrying the run's attrs), or its attrs.

    Returns
    -------
    RunSettings
    """
    attrs = getattr(ds_or_attrs, "attrs", ds_or_attrs)
    attrs = attrs if isinstance(attrs, Mapping) else {}
    tau = attrs.get("tau")
    tau = DEFAULT_TAU if tau is None or (isinstance(tau, str) and not tau) else float(tau)
    dims = getattr(ds_or_attrs, "dims", ())
    if "solver" in dims:
        solvers = tuple(str(x) for x in ds_or_attrs["solver"].values)
    else:
        method = attrs.get("solver_method")
        solvers = (str(method) if method not in (None, "") else DEFAULT_SOLVER,)
    each = _json(attrs.get("solvers"))
    recorded: dict[str, SolverSettings] = {}
    if isinstance(each, Mapping):
        for name, solver_attrs in each.items():
            recorded[str(name)] = SolverSettings.from_attrs(solver_attrs, method=str(name))
    if solvers[0] not in recorded:
        recorded[solvers[0]] = SolverSettings.from_attrs(attrs, method=solvers[0])
    dtype = run_config(attrs).get("dtype")
    if dtype:
        from psens.models.loading import DTYPE_NAMES

        dtype = DTYPE_NAMES.get(str(dtype), str(dtype))
    floor = attrs.get("noise_floor")
    normalization = attrs.get("normalization")
    return RunSettings(
        tau=tau,
        solvers=solvers,
        solver_settings=recorded,
        dtype=str(dtype or "float32"),
        noise_floor=str(floor) if floor not in (None, "", False) else None,
        normalization=str(normalization) if normalization else DEFAULT_NORMALIZATION,
        answer=str(attrs.get("answer") or DEFAULT_ANSWER),
        cloze_norm=str(attrs.get("cloze_norm") or DEFAULT_CLOZE_NORM),
    )


def tau_of(ds_or_attrs: Any, tau: float | None = None) -> float | Any:
    """``tau`` when given, else the salience threshold the run was made with
    (:func:`run_settings`; :data:`DEFAULT_TAU` for a run that records none, or for arrays).
    Every ``psens.ips`` function that takes a run reads its τ through this.

    Examples
    --------
    >>> tau_of({"tau": 0.2}), tau_of({"tau": 0.2}, 0.05), tau_of({})
    (0.2, 0.05, 0.1)
    """
    return run_settings(ds_or_attrs).tau if tau is None else tau
