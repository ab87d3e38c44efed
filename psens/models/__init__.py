"""Model layer: loading, mask tokens, the model table and the IPS value function.

``import psens.models`` does not import torch; :func:`load` does.

Examples
--------
>>> import psens
>>> scorer = psens.models.load("smollm2-135m-instruct")  # doctest: +SKIP
>>> item = psens.datasets.load("arc-challenge", split="validation", limit=1)[0]  # doctest: +SKIP
>>> n = len(psens.prompts.variables(item))  # doctest: +SKIP
>>> v = scorer.value(item, "ips1", masks=[0, 2**n - 1])  # doctest: +SKIP
"""

from __future__ import annotations

import os

from psens.models.generation import LocalGenerator
from psens.models.loading import PACKAGED_MODELS, cache_root, resolve_source
from psens.models.mask_tokens import FALLBACK_TOKENS, MaskToken, mask_token
from psens.models.mask_tokens import mask_token as _mask_rule
from psens.models.registry import data_dir, lookup, model_table
from psens.models.scorer import CLAMP, Encoded, Prediction, Scorer

__all__ = [
    "CLAMP",
    "FALLBACK_TOKENS",
    "PACKAGED_MODELS",
    "Encoded",
    "LocalGenerator",
    "MaskToken",
    "Prediction",
    "Scorer",
    "cache_root",
    "data_dir",
    "load",
    "lookup",
    "mask_token",
    "model_table",
    "resolve_source",
]


def load(
    name_or_path: str | os.PathLike = "smollm2-135m-instruct",
    *,
    dtype=None,
    device: str = "cpu",
    mask_token: str | int | None = None,
    cache_dir: str | os.PathLike | None = None,
    verbose: bool = False,
    source: dict | None = None,
    trust_remote_code: bool = False,
    **scorer_options,
) -> Scorer:
    """Load a causal LM and wrap it in a :class:`Scorer`.

    Parameters
    ----------
    name_or_path : str or path
        A packaged short name (``"smollm2-135m-instruct"``, ``"gemma3-270m"``), a name of
        the model table (its hub id), a GGUF file, a folder written by
        ``save_pretrained``, or a hub id (``"org/model"``; needs the internet unless
        already in the hub cache). A path that exists (or starts with ``.``, ``/`` or
        ``~``) is always that path, even when its name is also a packaged or table name.
    dtype : {"float32", "float16", "bfloat16", "auto"} or torch.dtype, optional
        Default float32 on every device; ``"auto"``: the checkpoint's own dtype (its
        ``config.json``; float32 for a GGUF model, which psens dequantises). The paper ran
        float16 on GPUs (E.1); pass ``dtype="float16"`` to replicate that, knowing that IPS
        is sensitive to the rounding: on SmolLM2 (10 ARC prompts, n=8) float16 moves v by
        0.011 on average and the IPS between the float32 and float16 decompositions of the
        *same* prompt is 0.20 (bfloat16: 0.085 and 1.28, out of 2).
    device : {"cpu", "cuda", "cuda:N", "mps", "auto"}
        ``"auto"``: ``device_map="auto"`` (accelerate) shards the model over the GPUs (the
        CPU without one).
    mask_token : str or int, optional
        Override of the mask token (appendix E.4); see :func:`mask_token`.
    cache_dir : path, optional
        Where GGUF models are converted to float safetensors (default
        ``$PSENS_CACHE/models`` or ``~/.cache/psens/models``), one folder per GGUF file
        content.
    source : dict, optional
        :func:`resolve_source` of ``name_or_path`` when the caller has resolved it already
        (:class:`psens.models.spec.ModelSpec`).
    trust_remote_code : bool
        Run the model's own code from its folder or hub repository (default false; always
        passed to transformers, so it never asks on the terminal).
    **scorer_options
        Passed to :class:`Scorer` (``n_max``, ``seed``, ``one_token_per_word``,
        ``batch_size``, ``progress``, ``open_tokens``, ``open_reduce``).

    Returns
    -------
    Scorer
    """
    from psens.models.loading import load_model_and_tokenizer

    src = source or resolve_source(name_or_path, cache_dir)
    row = lookup(src["name"]) or lookup(str(name_or_path))
    table_name = row["name"] if row else src["name"]
    chosen: list[MaskToken] = []

    def check(tok) -> None:
        chosen.append(_mask_rule(tok, table_name if row else None, mask_token))

    model, tok, info = load_model_and_tokenizer(
        name_or_path,
        dtype=dtype,
        device=device,
        cache_dir=cache_dir,
        verbose=verbose,
        check_tokenizer=check,
        source=src,
        trust_remote_code=trust_remote_code,
    )
    if row:
        info.update({f"table_{k}": v for k, v in row.items()})
    return Scorer(model, tok, name=table_name, mask=chosen[0], info=info, **scorer_options)
