"""Reading a run config file: TOML (``.toml``) or YAML (``.yaml``/``.yml``), for every kind
of run (an IPS run, :func:`psens.config.load_config`; a method run,
:func:`psens.method_runs.load`), refusing in one line what is not a readable table of keys.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from psens._validation import fail, shown
from psens.config_schema import WHERE

__all__ = ["MAX_ALIAS_VALUES", "read_config_file", "read_yaml"]


def read_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """The table of keys of a TOML (``.toml``) or YAML (``.yaml``/``.yml``) config file,
    refusing a missing file, bad syntax or a file that is not a table."""
    p = Path(path)
    if not p.is_file():
        fail(WHERE, f"config file {p} not found", "Check the path")
    text = p.read_text()
    if p.suffix == ".toml":
        import tomllib

        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            fail(WHERE, f"{p}, {_toml_position(exc)}not valid TOML ({exc})", "Fix the syntax")
    elif p.suffix in (".yaml", ".yml"):
        raw = read_yaml(text, p)
    else:
        fail(WHERE, f"{p} has suffix {p.suffix!r}", "Use a .toml, .yaml or .yml file")
    if not isinstance(raw, dict):
        fail(
            WHERE,
            f"{p} holds a {type(raw).__name__}, not a table of keys",
            "Write one key per line (store = ..., models = [...], dataset = ...)",
        )
    return raw


#: The most values the aliases (``*name``) of a YAML config may add to it when expanded.
MAX_ALIAS_VALUES = 10_000


def read_yaml(text: str, p: Path) -> Any:
    """The value of a YAML config (the safe subset: no Python objects), refusing in one line
    naming ``p`` and the line: bad syntax, a mapping that repeats a key (TOML refuses it;
    PyYAML would keep the last one), and aliases that expand to more than
    :data:`MAX_ALIAS_VALUES` values or into themselves (a "billion laughs" of a few hundred
    bytes expands to gigabytes). The document is composed (aliases are shared nodes, so
    this is cheap), checked, and only then built.
    """
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        distinct, expanded = _yaml_counts(root, p)
        if expanded - distinct > MAX_ALIAS_VALUES:
            fail(
                WHERE,
                f"{p}: its aliases (*name) expand to {expanded:,} values from {distinct:,}",
                f"Write the values out, or use aliases that add at most {MAX_ALIAS_VALUES:,}",
            )
        return loader.construct_document(root)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        fail(WHERE, f"{p}, {line}not valid YAML ({problem})", "Fix the syntax")
    except RecursionError:
        fail(WHERE, f"{p} nests its values too deeply", "Write a flat table of keys")
    finally:
        loader.dispose()


def _yaml_counts(root: Any, p: Path) -> tuple[int, int]:
    """``(distinct nodes, nodes once every alias is expanded)`` of a composed YAML document,
    refusing a mapping that repeats a key and an alias inside its own anchor."""
    import yaml

    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: Any) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            line = node.start_mark.line + 1
            fail(WHERE, f"{p}, line {line}: an alias refers to itself", "Remove the alias")
        open_nodes.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(x) for x in node.value)
        elif isinstance(node, yaml.MappingNode):
            seen: set = set()
            for k, v in node.value:
                name = (k.tag, k.value) if isinstance(k, yaml.ScalarNode) else None
                if name is not None and k.tag != "tag:yaml.org,2002:merge":
                    if name in seen:
                        fail(
                            WHERE,
                            f"{p}, line {k.start_mark.line + 1}: the key {shown(k.value)} "
                            "appears twice in one table",
                            "Keep one of them",
                        )
                    seen.add(name)
                total += size(k) + size(v)
        open_nodes.discard(key)
        sizes[key] = total
        return total

    expanded = size(root)
    return len(sizes), expanded


def _toml_position(exc: Exception) -> str:
    """``"line L, column C: "`` of a TOML error (``lineno`` on Python >= 3.14, else parsed
    from the message ``"... (at line L, column C)"``)."""
    import re

    line = getattr(exc, "lineno", None)
    col = getattr(exc, "colno", None)
    if line is None:
        m = re.search(r"at line (\d+), column (\d+)", str(exc))
        if not m:
            return ""
        line, col = int(m.group(1)), int(m.group(2))
    return f"line {line}, column {col}: "
