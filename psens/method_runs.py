"""Runs of the output-level methods (EAS, DBSA, subjective PSS) beside the IPS runs.

An IPS run is a resumable zarr store (:mod:`psens.store`, :func:`psens.run`). EAS, DBSA and
subjective PSS runs are small and are written in one go as a netCDF file marked with the
attrs ``psens_method`` (``"eas"``, ``"dbsa"``, ``"subjective"``) and
``psens_method_version``, sealed with checksums (:mod:`psens.store.files`). Their TOML
configs say ``method = "eas"``, ``"dbsa"`` or ``"subjective"`` (:mod:`psens.pss.subjective`);
a config without ``method`` (or with ``method = "ips"``) is an IPS run. Every run file
opens with :func:`psens.open_run`:

>>> cfg = load("data/runs/eas.toml")        # doctest: +SKIP
>>> ds = run(cfg)                          # doctest: +SKIP
>>> print(summarize(psens.open_run("data/runs/eas.nc")))  # doctest: +SKIP

:func:`psens.open_run` opens an EAS file as an :class:`xarray.Dataset` and a DBSA file as
an :class:`xarray.DataTree` (one group per prompt and model).
"""

from __future__ import annotations

import os

from psens._validation import fail, shown
from psens.store import METHOD_ATTR, METHODS

__all__ = ["METHODS", "load", "reread_verdicts", "run", "summarize"]

WHERE = "psens method run"


def _module(method: str):
    if method == "eas":
        from psens.eas import run as module
    elif method == "dbsa":
        from psens.dbsa import run as module
    elif method == "subjective":
        from psens.pss import subjective as module
    else:
        fail(WHERE, f"method = {shown(method)} is not known", f"Use one of {['ips', *METHODS]}")
    return module


def load(path: str | os.PathLike):
    """The config of any run file: a :class:`psens.config.RunConfig` (IPS, the default), an
    :class:`psens.eas.run.EASConfig` or a :class:`psens.dbsa.run.DBSAConfig`."""
    from psens.config import RunConfig
    from psens.config_files import read_config_file

    raw = read_config_file(path)
    method = raw.pop("method", "ips")
    if method == "ips":
        return RunConfig.from_dict(raw)
    module = _module(str(method))
    return module.CONFIG.from_dict({**raw, "method": method})


def run(
    cfg, out: str | os.PathLike | None = None, *, progress: bool = True, overwrite: bool = False
):
    """Run an EAS, DBSA or subjective PSS config and write its file (``out``, default its
    ``store``). An existing file is refused before anything is loaded unless it is a psens
    run file and ``overwrite`` is given (as ``psens export``); progress goes to stderr."""
    return _module(cfg.method).run(cfg, out, progress=progress, overwrite=overwrite)


def summarize(obj) -> str:
    """The text summary of an opened method run."""
    return _module(str(obj.attrs.get(METHOD_ATTR))).summarize(obj)


def reread_verdicts(obj):
    """An opened EAS or subjective PSS run with its judge verdicts read again from the stored
    replies by the current parser and everything computed from them recomputed (the
    method's ``reread``: :func:`psens.eas.run.reread`, :func:`psens.pss.subjective.reread`);
    every other variable, coordinate and attr as stored. A DBSA run has no judge: refused."""
    method = str(obj.attrs.get(METHOD_ATTR))
    if method not in ("eas", "subjective"):
        fail(
            WHERE,
            f"a {method} run has no judge verdicts to read again",
            "Pass an EAS or subjective PSS run file",
        )
    return _module(method).reread(obj)
