"""Command line: ``psens run CONFIG`` (an IPS run, or an EAS / DBSA / subjective PSS run when
the config says ``method = "eas"`` / ``"dbsa"`` / ``"subjective"``), ``psens summary STORE``
(a zarr store, its netCDF export, or a method run file: its method's headline), ``psens
export STORE OUT.nc [--overwrite]`` (replaces only an earlier psens run file), ``psens
verify STORE`` (a store or any run file: its checksums), ``psens plan
CONFIG [--offline] [--calibrate]`` (also ``psens run --plan CONFIG``: what the run costs, per
model, without loading weights; :mod:`psens.plan`).

Exit codes: 0 success; 1 ``psens verify`` found damage; 2 a refused input (the message says
what is wrong and how to fix it); 130 ``psens run`` interrupted (Ctrl-C): one line says how
many blocks are done; running the same command again resumes. ``psens export`` of an
unfinished run warns how many blocks are pending or failed.
"""

from __future__ import annotations

import argparse
import errno
import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="psens", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="run or resume an IPS experiment from a TOML/YAML config")
    p_run.add_argument("config", help="path to a .toml or .yaml config")
    p_run.add_argument("--scheduler", help="'local:N' or 'tcp://host:port' (overrides config)")
    p_run.add_argument(
        "--overwrite",
        action="store_true",
        help="start over if the store exists (a method run: replace its earlier run file)",
    )
    p_run.add_argument("--no-progress", action="store_true", help="no progress bars")
    p_run.add_argument("--report", help="also write an HTML report to this path")
    p_run.add_argument("--plan", action="store_true", help="print the plan (psens plan); no run")
    p_run.add_argument("--offline", action="store_true", help="with --plan: no network")
    p_plan = sub.add_parser(
        "plan", help="what a run costs per model (passes, time, memory, store, downloads)"
    )
    p_plan.add_argument("config", help="path to a .toml or .yaml config")
    p_plan.add_argument(
        "--calibrate", action="store_true", help="score one batch per local model (loads it)"
    )
    p_plan.add_argument(
        "--offline", action="store_true", help="no network: hub models are reported as to download"
    )
    p_sum = sub.add_parser("summary", help="print the summary of a stored run")
    p_sum.add_argument("store", help="a .zarr store or a .nc run file written by psens")
    p_exp = sub.add_parser("export", help="export a stored run (or copy a run file) to netCDF")
    p_exp.add_argument("store")
    p_exp.add_argument("out")
    p_exp.add_argument(
        "--overwrite", action="store_true", help="replace OUT if it is an earlier psens run file"
    )
    p_ver = sub.add_parser(
        "verify", help="check a stored run or run file against its checksums; name the damage"
    )
    p_ver.add_argument("store")
    args = parser.parse_args(argv)
    try:
        return _dispatch(args)
    except (ValueError, KeyError, TypeError) as exc:
        msg = exc.args[0] if exc.args else str(exc)
        print(_terminal_safe(f"error: {msg}"), file=sys.stderr)
        return 2
    except OSError as exc:  # a path that cannot be read or written: one line, no traceback
        if exc.errno is None and exc.args:  # raised with a message (psens' own)
            print(f"error: {exc.args[0]}", file=sys.stderr)
            return 2
        what = exc.strerror or type(exc).__name__
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"error: psens {args.command}: {what}{where}. Check the path", file=sys.stderr)
        return 2


def _terminal_safe(text: str) -> str:
    r"""``text`` with every control character but line breaks and tabs written as an escape
    (``"\x1b"``), so that names read from a file (a model, a sample, a template) cannot move
    the cursor, recolour or retitle the terminal (ESC and OSC sequences).

    Examples
    --------
    >>> _terminal_safe("model \x1b]0;title\x07 ok\n")
    'model \\x1b]0;title\\x07 ok\n'
    """
    import unicodedata

    return "".join(
        c if c in "\n\t" or unicodedata.category(c) not in ("Cc", "Cf") else repr(c)[1:-1]
        for c in text
    )


def _dispatch(args) -> int:
    from psens import store
    from psens.pipeline import run
    from psens.runner import summarize

    if args.command == "plan" or (args.command == "run" and args.plan):
        from psens.plan import calibrate, format_plan, make_plan

        rp = make_plan(args.config, offline=args.offline)  # the config checked once
        if getattr(args, "calibrate", False):
            rp = calibrate(rp)
        print(format_plan(rp))
        return 0
    if args.command == "run":
        from psens import method_runs
        from psens.config import read_config_file

        raw = read_config_file(args.config)
        if raw.get("method", "ips") != "ips":  # a method run: written in one go
            cfg = method_runs.load(args.config)
            if args.scheduler or args.report:
                print(
                    f"error: psens run: --scheduler and --report are for IPS runs, not "
                    f"{cfg.method} runs. Leave them out",
                    file=sys.stderr,
                )
                return 2
            method_runs.run(cfg, progress=not args.no_progress, overwrite=args.overwrite)
            print(cfg.store)
            return 0
        raw.pop("method", None)
        if args.scheduler:
            raw["scheduler"] = args.scheduler
        where = str(raw.get("store"))
        try:  # the config is checked once, by the run (psens.plan.resolve)
            ds = run(raw, overwrite=args.overwrite, progress=not args.no_progress)
        except KeyboardInterrupt:
            print(f"interrupted: {_progress(where)}", file=sys.stderr)
            return 130
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            print(
                f"psens run: the disk is full ({exc.filename or where}); "
                f"{_progress(where)} once space is free",
                file=sys.stderr,
            )
            return 1
        if args.report:
            from psens.report import write_report

            print(f"report: {write_report(ds, args.report)}", file=sys.stderr)
        return 0
    if args.command == "summary":
        from psens import method_runs

        ds = store.open_run(args.store, verify=True)
        if store.METHOD_ATTR in ds.attrs:  # an EAS, DBSA or subjective PSS run file
            print(_terminal_safe(method_runs.summarize(ds)))
        else:
            print(_terminal_safe(summarize(ds)))
        return 0
    if args.command == "export":
        store.check_export_target(args.out, overwrite=args.overwrite, source=args.store)
        ds = store.open_run(args.store, verify=True)
        status = None if store.METHOD_ATTR in ds.attrs else ds["status"].values
        if status is not None and (status != store.DONE).any():
            print(
                f"warning: {int((status != store.DONE).sum())} of {status.size} blocks are not "
                f"done ({int((status == store.PENDING).sum())} pending, "
                f"{int((status == store.FAILED).sum())} failed); the export holds NaN for them. "
                "Run the same config again to finish them",
                file=sys.stderr,
            )
        print(store.to_netcdf(ds, args.out, overwrite=args.overwrite))
        return 0
    if args.command == "verify":
        found = store.verify(args.store)
        print(_terminal_safe(found.report()))
        return 0 if found.ok else 1
    raise AssertionError(args.command)


def _progress(path: str) -> str:
    """``"12 of 40 blocks done; run the same command again to resume"`` for an interrupted
    run (without counts when the store was not created yet)."""
    from psens import store

    again = "run the same command again to resume"
    try:
        status = store.open_run(path)["status"].values
    except Exception:  # the store does not exist yet, or is being created
        return f"no block done yet; {again}"
    return f"{int((status == store.DONE).sum())} of {status.size} blocks done; {again}"


if __name__ == "__main__":
    raise SystemExit(main())
