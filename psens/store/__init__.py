"""The run store: one xarray Dataset per run, persisted as zarr (the schema below, written once).

Only this module imports zarr. It owns the schema: the dimension, coordinate and
variable names below, the schema version, and the checks that refuse a store that is
not a psens run (or of an unknown version) before anything is read.

Schema (version 1)
------------------
dims
    ``model``, ``sample``, ``template``, ``subset`` (``2**n_max``), ``var`` (``n_max``),
    ``pair`` (unordered template pairs, labelled ``"a|b"`` by their templates: select
    ``ds.sel(pair="ips1|ips4")``, also ``"ips4-ips1"``; stores written before the labels
    hold the numbers 0 .. P-1, relabelled when read); ``shot`` when a run has few-shot
    settings.
coords
    ``order(subset)`` popcount; ``word(sample, var)`` the variables ('' beyond n);
    ``n_vars(sample)``; model metadata ``family, series, kind, arch, params,
    active_params, mask_token`` (model); ``perturbation(template)``;
    ``template_a(pair)``, ``template_b(pair)``; derived when read, never stored:
    ``order_band(sample, subset)`` the order band (``low``/``mid``/``high``, ``''`` for
    ∅ and beyond n; :mod:`psens.store.labels`).
data variables
    ``v, I_and, I_or, gamma`` (model, sample, [shot,] template, subset) float64, NaN on
    subsets beyond a sample's ``n``; ``p_target, confidence, correct`` (… template)
    float64; ``prediction`` (… template) the option letter chosen (open items: the
    generated text); ``generated`` (… template) the greedy generated text;
    ``hidden_cosine, hidden_l2`` (model, sample, [shot,] pair) final-layer hidden-state
    similarity between the two templates of a pair (appendix H);
    ``matching_error`` (model, sample) the largest universal-matching error of the block;
    ``status`` (model, sample) 0 pending / 1 done / 2 failed, with ``error`` text;
    ``prompt`` (sample, [shot,] template) and ``target`` (sample) the answer that follows
    the prompt: an MCQ item's correct label in the item's own labels (``prediction``'s
    label space, after the first template's answer prefix), :func:`item_targets` reads it
    (and an older format-space export's, in the first format's labels) without the prefix.
    With a noise floor (config ``noise_floor``): ``v_floor`` (like ``v``) the log-odds
    scored again with the model in half precision, and ``floor`` (model, sample, [shot,]
    template, band) the IPS between the two scorings, per ``band`` = all / low / mid /
    high (the dim is not called ``order``: that is the popcount coordinate of ``subset``).
    With a list of solvers (config ``solver = [...]``): ``I_and, I_or, gamma`` (and
    ``floor``) have a ``solver`` dim before ``template``, one entry per solver, and the
    attr ``solvers`` holds each solver's settings; ``psens.ips.select_solver`` picks one.
    With ``answer = "cloze"`` (:mod:`psens.cloze`): the ``option`` dim, ``option_loglik``
    (model, sample, [shot,] template, subset, option) each option's summed log-likelihood
    as the continuation of each masked prompt, ``option_tokens`` (… template, option) its
    continuation's tokens, and the coordinates ``option_label``, ``option_bytes``
    (sample, option) and ``answer_option`` (sample); ``v`` is the cloze value under the
    run's ``cloze_norm``, and :func:`psens.cloze.rescore` gives any other.
attrs
    ``psens_schema = "psens.run"``, ``psens_schema_version``, ``psens_version``, ``tau``,
    the solver settings (``solver_*``), ``config`` (JSON) and ``config_hash``;
    ``noise_floor`` (the dtype of the second scoring, only in runs with a floor);
    ``normalization`` (``"all"``, only in runs that normalise over the empty set too;
    :func:`psens.settings.run_settings` reads ``"nonempty"`` where it is absent);
    ``preset`` (``"paper"``, only in runs made with ``preset = "paper"``);
    ``answer`` and ``cloze_norm`` (only in cloze runs);
    ``run_id`` (a uuid drawn when :func:`create` makes the store); from ``psens run``:
    ``batch_size`` (the masked prompts per forward pass it scored with: the config's, or
    the one ``batch_size = "auto"`` chose) and ``loading`` (JSON, per local model its
    ``dtype`` and ``attn_implementation``, ``"sdpa"`` or ``"eager"``).
integrity (on disk only; :func:`open_run` leaves them out of the Dataset)
    ``block_checksum`` (model, sample): per block, a JSON object of one blake2b digest per
    data variable, written with the block; the root attr ``psens_checksums``: a digest of
    every coordinate array (and ``prompt``, ``target``), of the root attributes that
    change numbers (such as ``tau``) and (checksum format 2, root attr
    ``psens_checksum_version``) of every array's metadata document (data type, fill value,
    codecs, attributes), written at creation. Stores without them (older psens) still
    open; :func:`verify` then says so. Whatever the format, an array whose metadata psens
    never writes (``scale_factor``, ``add_offset``, another fill value, ...) or whose
    consolidated copy in the root differs is refused before any value is read.

One (model, sample) block is one chunk of every per-block variable, so a block is
written (and re-written on resume) without touching any other block; that is what lets
dask workers write regions in parallel.

Safety
------
* :func:`create` writes the new store into a hidden sibling folder and renames it into
  place, so a kill during creation never leaves a half-made store; ``overwrite`` replaces
  only a psens store or an empty folder.
* :func:`lock` holds an OS lock (``flock`` on ``<store>.lock`` beside the store) for a whole
  run; a second holder is refused with the first one's PID.
* :func:`write_block` replaces a whole block (variables not given are written empty, a
  failed block is all NaN) and refuses a writer whose ``run_id`` is not the store's.
* :func:`verify` re-reads every block and coordinate array and compares the checksums.

Run files
---------
A finished IPS run is exchanged as one netCDF export (:func:`to_netcdf`); EAS, DBSA and
subjective PSS runs are one netCDF file each (:mod:`psens.store.files`). Both are written
into a hidden sibling, sealed with a digest of every variable, coordinate and attribute set
(the root attr ``psens_checksums``) and renamed into place; :func:`open_run` and
:func:`verify` take them as they take a store.
"""

from __future__ import annotations

from psens.store.checksums import (
    ATTRS_KEY,
    METADATA_KEY,
    Verification,
    metadata_problems,
)
from psens.store.export import (
    check_export_target,
    to_netcdf,
)
from psens.store.files import (
    METHOD_ATTR,
    METHOD_VERSION,
    METHOD_VERSION_ATTR,
    METHODS,
    FileVerification,
    check_target,
    is_method_run,
    method_of,
    verify,
    verify_file,
    write_method_run,
)
from psens.store.read import (
    item_targets,
    open_run,
)
from psens.store.safety import (
    lock,
    remove_leftovers,
)
from psens.store.schema import (
    BLOCK_VARS,
    CHECKSUM_ATTR,
    CHECKSUM_VAR,
    CHECKSUM_VERSION,
    CHECKSUM_VERSION_ATTR,
    CLOZE_VARS,
    DATA_VARS,
    DERIVED_COORDS,
    DONE,
    EXPORT_ATTR,
    FAILED,
    FLOOR_BANDS,
    FLOOR_VARS,
    GAME_VARS,
    MODEL_META,
    PAIR_VARS,
    PENDING,
    RUN_ID_ATTR,
    SCHEMA,
    SCHEMA_VERSION,
    TEMPLATE_VARS,
    TEXT_VARS,
    build,
)
from psens.store.write import (
    create,
    save,
    write_block,
)

__all__ = [
    "ATTRS_KEY",
    "BLOCK_VARS",
    "CHECKSUM_ATTR",
    "CHECKSUM_VAR",
    "CHECKSUM_VERSION",
    "CHECKSUM_VERSION_ATTR",
    "CLOZE_VARS",
    "DATA_VARS",
    "DERIVED_COORDS",
    "DONE",
    "EXPORT_ATTR",
    "FAILED",
    "FLOOR_BANDS",
    "FLOOR_VARS",
    "GAME_VARS",
    "METADATA_KEY",
    "METHODS",
    "METHOD_ATTR",
    "METHOD_VERSION",
    "METHOD_VERSION_ATTR",
    "MODEL_META",
    "PAIR_VARS",
    "PENDING",
    "RUN_ID_ATTR",
    "SCHEMA",
    "SCHEMA_VERSION",
    "TEMPLATE_VARS",
    "TEXT_VARS",
    "FileVerification",
    "Verification",
    "build",
    "check_export_target",
    "check_target",
    "create",
    "is_method_run",
    "item_targets",
    "lock",
    "metadata_problems",
    "method_of",
    "open_run",
    "remove_leftovers",
    "save",
    "to_netcdf",
    "verify",
    "verify_file",
    "write_block",
    "write_method_run",
]
