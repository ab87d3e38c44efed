"""The runs of the output-level methods (EAS, DBSA, subjective PSS): what a method's run
module declares (:class:`MethodRun`), the config base class and its checks, the attrs, the
target check and the progress lines. :mod:`psens.method_runs` is the entry point (load, run,
summarize): it finds a method's :class:`MethodRun` through
:data:`psens.config_schema.RUN_MODULES`.

A method run is written in one go as a netCDF file marked with the attrs ``psens_method``
(the method's key in :data:`psens.config_schema.RUN_MODULES`) and ``psens_method_version``,
with its checksums (:func:`psens.store.write_method_run`); :func:`psens.open_run` opens it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from psens._validation import check_keys
from psens.config_schema import required

__all__ = [
    "MethodConfig",
    "MethodRun",
    "check_models",
    "method_attrs",
    "say",
    "set_threads",
    "start",
    "steps",
]


class MethodConfig:
    """Shared construction of the EAS, DBSA and subjective PSS run configs: a subclass is
    declared by :func:`psens.config_schema.declare` (its keys are the method's rows of
    :data:`psens.config_schema.FIELDS`) and its ``check`` runs
    :func:`psens.config_schema.check_fields`, then what reads several keys."""

    method: ClassVar[str]

    @classmethod
    def from_dict(cls, raw: dict[str, Any]):
        """Build from a mapping, refusing unknown keys (with the closest valid key) and
        missing required keys, then :meth:`check`."""
        where = f"psens {raw.get('method', '?') if isinstance(raw, dict) else '?'} config"
        check_keys(raw, [f.name for f in dataclasses.fields(cls)], required(cls.method), where)
        cfg = cls(**raw)
        cfg.check()
        return cfg

    def check(self) -> None:  # pragma: no cover - every subclass has its own
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class MethodRun:
    """What a method's run module declares, once, as its module-level ``RUN``; the module is
    named in :data:`psens.config_schema.RUN_MODULES` under the key ``method``.

    Parameters
    ----------
    method : str
        The method's key: a config's ``method = "..."`` and the run file's ``psens_method``
        attr.
    config : type
        The config class (a :class:`MethodConfig` subclass declared from the method's rows
        of :data:`psens.config_schema.FIELDS`).
    run : callable
        ``run(cfg, out=None, *, progress=True, overwrite=False)``: run the config, write its
        file (:func:`psens.store.write_method_run`) and return what was written.
    summarize : callable
        ``summarize(obj) -> str``: the text summary of an opened run file.
    reread : callable or None
        ``reread(obj)``: the opened run with its judge verdicts read again from the stored
        replies; None for a method without a judge.
    """

    method: str
    config: type
    run: Callable[..., Any]
    summarize: Callable[[Any], str]
    reread: Callable[[Any], Any] | None = None


def check_models(names: list[str], where: str) -> None:
    """Every name must be a local model psens can load (packaged, table, path or hub id);
    nothing is loaded."""
    from psens.models.spec import ModelSpec

    for name in names:
        ModelSpec.from_entry(name, where=where)  # resolved as a run's models are


def method_attrs(method: str, cfg: MethodConfig) -> dict[str, Any]:
    """The attrs every method run carries: its method and version, the psens version, and
    the config (JSON-able values, lists as JSON text)."""
    import json

    from psens._version import __version__
    from psens.store import METHOD_ATTR, METHOD_VERSION, METHOD_VERSION_ATTR

    attrs: dict[str, Any] = {
        METHOD_ATTR: method,
        METHOD_VERSION_ATTR: METHOD_VERSION,
        "psens_version": __version__,
    }
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if f.name == "store":
            continue
        if isinstance(value, list | tuple | dict):
            value = json.dumps(value, sort_keys=True)
        attrs[f.name] = "" if value is None else value
    return attrs


def set_threads(threads: int | None) -> None:
    """``torch.set_num_threads(threads)`` when given (runs are identical for a fixed count)."""
    if threads is not None:
        import torch

        torch.set_num_threads(int(threads))


def start(cfg: MethodConfig, out: str | os.PathLike | None, *, overwrite: bool) -> Path:
    """Before anything is loaded: check ``cfg``, refuse a target that would destroy
    something (:func:`psens.store.check_target`: an existing file unless it is a psens run
    file and ``overwrite``) and set the thread count. Returns the file to write."""
    from psens.store import check_target

    cfg.check()
    path = Path(out or cfg.store)
    if path.parent.is_dir():  # a missing folder is made when the file is written
        check_target(path, overwrite=overwrite, where=f"psens {cfg.method} run")
    set_threads(cfg.threads)
    return path


def steps(items, *, method: str, progress: bool, unit: str = "model"):
    """``items`` with a tqdm bar on stderr (as the IPS runner's), none when not ``progress``."""
    import sys

    from tqdm.auto import tqdm

    return tqdm(items, desc=method, unit=unit, disable=not progress, file=sys.stderr)


def say(line: str, progress: bool) -> None:
    """One progress line on stderr, above any bar (nothing when not ``progress``)."""
    if progress:
        import sys

        from tqdm.auto import tqdm

        tqdm.write(line, file=sys.stderr)
