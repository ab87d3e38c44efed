"""Runs of the output-level methods (EAS, DBSA, subjective PSS) beside the IPS runs.

An IPS run is a resumable zarr store (:mod:`psens.store`, :func:`psens.run`). A method run
is small and is written in one go as a netCDF file marked with the attrs ``psens_method``
(the method's key) and ``psens_method_version``, sealed with checksums
(:mod:`psens.store.files`). Its TOML config says ``method = "<key>"``; a config without
``method`` (or with ``method = "ips"``) is an IPS run. Every run file opens with
:func:`psens.open_run`:

>>> cfg = load("data/runs/eas.toml")        # doctest: +SKIP
>>> ds = run(cfg)                          # doctest: +SKIP
>>> print(summarize(psens.open_run("data/runs/eas.nc")))  # doctest: +SKIP

The methods are the keys of :data:`psens.config_schema.RUN_MODULES` (``"eas"``, ``"dbsa"``,
``"subjective"``), each naming the module that declares the method's ``RUN``, a
:class:`psens._runfile.MethodRun`: its config class, ``run``, ``summarize`` and, for a
judged method, ``reread``. :func:`declared` imports that module when it is first needed;
nothing here names a method.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from psens._runfile import MethodRun
from psens._validation import fail, shown
from psens.config_schema import RUN_MODULES
from psens.store import METHOD_ATTR, METHODS

__all__ = ["METHODS", "declared", "load", "reread_verdicts", "run", "summarize"]

WHERE = "psens method run"


def declared(method: str) -> MethodRun:
    """The :class:`psens._runfile.MethodRun` of the method key ``method``: the ``RUN`` of
    its module in :data:`psens.config_schema.RUN_MODULES`, imported now.

    Raises
    ------
    ValueError
        ``method`` is not a key of :data:`psens.config_schema.RUN_MODULES` (nor ``"ips"``).
    """
    if method not in RUN_MODULES:
        fail(WHERE, f"method = {shown(method)} is not known", f"Use one of {['ips', *METHODS]}")
    return importlib.import_module(RUN_MODULES[method]).RUN


def _of(obj: Any) -> MethodRun:
    """The :class:`psens._runfile.MethodRun` of an opened run file (its ``psens_method``)."""
    return declared(str(obj.attrs.get(METHOD_ATTR)))


def load(path: str | os.PathLike) -> Any:
    """The config of any run file: a :class:`psens.config.RunConfig` (IPS, the default) or
    the config class of its method (``method = "<key>"``: the ``config`` of
    :func:`declared`, e.g. :class:`psens.eas.run.EASConfig`)."""
    from psens.config import RunConfig
    from psens.config_files import read_config_file

    raw = read_config_file(path)
    method = raw.pop("method", "ips")
    if method == "ips":
        return RunConfig.from_dict(raw)
    return declared(str(method)).config.from_dict({**raw, "method": method})


def run(
    cfg: Any,
    out: str | os.PathLike | None = None,
    *,
    progress: bool = True,
    overwrite: bool = False,
) -> Any:
    """Run a method config and write its file (``out``, default its ``store``). An existing
    file is refused before anything is loaded unless it is a psens run file and
    ``overwrite`` is given (as ``psens export``); progress goes to stderr. Returns what was
    written (a Dataset, or a DataTree for DBSA)."""
    return declared(cfg.method).run(cfg, out, progress=progress, overwrite=overwrite)


def summarize(obj: Any) -> str:
    """The text summary of an opened method run (its method's ``summarize``)."""
    return _of(obj).summarize(obj)


def reread_verdicts(obj: Any) -> Any:
    """An opened method run with its judge verdicts read again from the stored replies by
    the current parser and everything computed from them recomputed (its method's
    ``reread``: :func:`psens.eas.run.reread`, :func:`psens.pss.subjective.reread`); every
    other variable, coordinate and attr as stored. A method without a judge (DBSA) has no
    ``reread``: refused."""
    declared_run = _of(obj)
    if declared_run.reread is None:
        judged = [m for m in METHODS if declared(m).reread is not None]
        fail(
            WHERE,
            f"a {declared_run.method} run has no judge verdicts to read again",
            f"Pass a run file of a judged method ({', '.join(judged)})",
        )
    return declared_run.reread(obj)
