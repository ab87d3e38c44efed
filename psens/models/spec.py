"""A run's model entry, resolved once: local weights or a model behind a server.

A config's ``models`` list holds names (a packaged short name, a name of the model table, a
folder, a GGUF file or a hub id) and served-model tables (``{name, base_url, model,
tokenizer, ...}``, :mod:`psens.models.served`). :meth:`ModelSpec.from_entry` is the one
place that tells the two apart and resolves where the model (or a served model's
tokenizer) comes from; everything downstream — the config hash, the availability checks,
the fingerprints a store records, the scorer a run loads, the table row the time estimate
and the store read — asks the spec.

Examples
--------
>>> spec = ModelSpec.from_entry("smollm2-135m-instruct")
>>> spec.name, spec.is_served, spec.source["kind"]
('smollm2-135m-instruct', False, 'gguf')
>>> served = ModelSpec.from_entry(
...     {"name": "s", "base_url": "http://127.0.0.1:8000/v1", "model": "m",
...      "tokenizer": "smollm2-135m-instruct"})
>>> served.is_served, served.identity()
(True, {'name': 's', 'model': 'm', 'tokenizer': 'smollm2-135m-instruct'})
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from psens._validation import fail, shown

__all__ = ["ModelSpec"]

WHERE = "psens config"


@dataclass(frozen=True, eq=False)
class ModelSpec:
    """One checked ``models`` entry of a run.

    Attributes
    ----------
    name : str
        The model's name in the store (a served model's ``name``).
    entry : str or mapping
        The entry as the config wrote it.
    source : dict
        :func:`psens.models.loading.resolve_source` of the weights (a local model) or of
        the tokenizer (a served model): resolved once, here.
    served : ServedModel or None
        The validated served-model entry; None for a local model.
    cache_dir : str or None
        The run's ``cache_dir`` (where GGUF models are converted).
    """

    name: str
    entry: str | Mapping[str, Any]
    source: dict[str, Any]
    served: Any = None
    cache_dir: str | os.PathLike | None = None

    @classmethod
    def from_entry(
        cls,
        entry: str | Mapping[str, Any],
        cache_dir: str | os.PathLike | None = None,
        where: str = WHERE,
    ) -> ModelSpec:
        """Check one ``models`` entry (no request, no weights read) and resolve it.

        A name must be packaged, in the model table, a path or a hub id ``org/name``; a
        served entry must be a valid table whose tokenizer is one of those.
        """
        from psens.models.loading import resolve_source

        if isinstance(entry, Mapping):
            from psens.models.served import ServedModel

            served = ServedModel.from_entry(entry, where)
            try:
                source = resolve_source(served.tokenizer, cache_dir)
            except (ValueError, FileNotFoundError) as exc:
                fail(
                    where,
                    f"served model {shown(served.name)}: unknown tokenizer "
                    f"{shown(served.tokenizer)} ({exc})",
                    "Use a packaged name, a folder, a GGUF file or a hub id 'org/model'",
                )
            return cls(served.name, dict(entry), source, served, cache_dir)
        if not isinstance(entry, str | os.PathLike) or not str(entry).strip():
            fail(
                where,
                f"a 'models' entry must be a name or a served-model table, got {shown(entry)}",
                'Write models = ["name", {name = "...", base_url = "http://...", ...}]',
            )
        try:
            source = resolve_source(entry, cache_dir)
        except (ValueError, FileNotFoundError) as exc:
            fail(
                where,
                f"unknown model {shown(str(entry))} in 'models' ({exc})",
                "Use a packaged name, a name of the model table, a path or a hub id 'org/model'",
            )
        return cls(str(entry), str(entry), source, None, cache_dir)

    # ----------------------------------------------------------------- identity

    @property
    def is_served(self) -> bool:
        """Whether the model is behind a server (it has no weights here, no dtype)."""
        return self.served is not None

    def identity(self) -> str | dict[str, Any]:
        """What the config hash keeps of the entry: a local model's name or path; a served
        model's ``name``, ``model`` and ``tokenizer`` (not where or how it is asked)."""
        if self.served is None:
            return str(self.entry)
        from psens.models.served import IDENTITY_KEYS

        return {k: self.entry[k] for k in IDENTITY_KEYS if k in self.entry}

    def table_row(self) -> dict[str, Any] | None:
        """The model table's row (:func:`psens.models.registry.lookup`), or None."""
        from psens.models.registry import lookup

        return lookup(self.name)

    def fingerprint(self) -> dict[str, Any]:
        """What the model's numbers depend on, without loading it: the files of a local
        model (:func:`psens.models.loading.model_fingerprint`); a served model's tokenizer
        files, the served model name and where it was served (only the tokenizer files
        are compared when a run resumes)."""
        from psens.models.loading import model_fingerprint

        fp = model_fingerprint(
            self.entry if self.served is None else self.served.tokenizer,
            self.cache_dir,
            source=self.source,
        )
        if self.served is None:
            return fp
        return {**fp, "kind": "served", **self.served.attrs()}

    # ----------------------------------------------------------------- before a run

    def check_available(self) -> None:
        """Refuse, before a store is created, a model that cannot be loaded (a local model:
        :func:`psens.models.loading.check_available`) or that nobody answers for (a served
        model: a TCP connect to every endpoint, :func:`psens.models.served.check_reachable`)."""
        if self.served is None:
            from psens.models.loading import check_available

            check_available(self.entry, self.cache_dir, source=self.source)
        else:
            from psens.models.served import check_reachable

            check_reachable(self.served)

    def load_scorer(
        self,
        *,
        dtype: str | None = None,
        device: str = "cpu",
        mask_token: str | None = None,
        trust_remote_code: bool = False,
        **options: Any,
    ):
        """The model's scorer: :func:`psens.models.load` for a local model (in ``dtype``,
        on ``device``, running the model's own code only with ``trust_remote_code``),
        :class:`psens.models.served.ServedScorer` for a served one (the server's precision
        and device: ``dtype``, ``device`` and ``trust_remote_code`` do not apply)."""
        if self.served is None:
            from psens import models

            return models.load(
                self.entry,  # a path is that path; a table name resolves to its hub id
                dtype=dtype,
                device=device,
                mask_token=mask_token,
                cache_dir=self.cache_dir,
                source=self.source,
                trust_remote_code=trust_remote_code,
                **options,
            )
        from psens.models.served import ServedScorer

        options.pop("progress", None)
        return ServedScorer(self.served, mask_token=mask_token, cache_dir=self.cache_dir, **options)
