"""Config YAML read safely (bounded size, aliases and depth; JSON types only) and the dotted
``section.key=value`` overrides of the command line."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from lira.config import ConfigError

MAX_YAML_BYTES = 1 << 20
"""Largest config file (or override value) read, in bytes (configs are a few KiB)."""
MAX_YAML_NODES = 100_000
"""Most values a config may hold once its aliases are expanded (a "billion laughs" file of
nested anchors holds billions): larger ones are refused before they are built."""
MAX_YAML_DEPTH = 64
"""Deepest nesting of mappings and lists a config may have."""
MAX_YAML_ENTRIES = 10_000
"""Most lines plus commas a config text may have (configs hold a few hundred): a file of tens
of thousands of keys is refused before the YAML parser spends seconds on it."""
_QUOTED = re.compile(r"'[^'\n]*'|\"(?:[^\"\\\n]|\\.)*\"")
_COMMENT = re.compile(r"(?:^|[ \t])#[^\n]*")
_BRACKET = re.compile(r"[\[\]{}]")
_DASHES = re.compile(r"(?:-[ \t]+)+")


def prescan(text: str, source: str, key: str = "") -> None:
    """ConfigError, before any parsing, when a config text has more than
    :data:`MAX_YAML_ENTRIES` lines and commas, or visibly nests deeper than
    :data:`MAX_YAML_DEPTH` levels (flow brackets, or block indentation and ``- `` markers,
    outside quotes and comments). Linear and cheap: a hostile file is refused in milliseconds;
    what it lets through is still checked exactly after parsing (:func:`_too_big`)."""
    entries = text.count("\n") + text.count(",")
    if entries > MAX_YAML_ENTRIES:
        raise ConfigError(
            key,
            f"{source} has {entries} lines and commas, more than a config holds "
            f"({MAX_YAML_ENTRIES}); point to the right file",
        )
    plain = _COMMENT.sub("", _QUOTED.sub("''", text))
    depth = deepest = 0
    for m in _BRACKET.finditer(plain):  # flow style: [ [ [ ... or {a: {a: ...
        depth = depth + 1 if m.group() in "[{" else max(depth - 1, 0)
        deepest = max(deepest, depth)
    indents = [-1]
    for line in plain.splitlines():  # block style: one level per deeper indentation
        body = line.lstrip(" ")
        if not body:
            continue
        indent = len(line) - len(body)
        while indents[-1] >= indent:
            indents.pop()
        indents.append(indent)
        dashes = _DASHES.match(body)  # "- - - x": a list in a list on one line
        levels = len(indents) - 1 + (dashes.group().count("-") if dashes else 0)
        deepest = max(deepest, levels)
    if deepest > MAX_YAML_DEPTH:
        raise ConfigError(key, f"{source} nests deeper than {MAX_YAML_DEPTH} levels; flatten it")


def _too_big(root: yaml.Node, source: str) -> None:
    """ConfigError when the node graph ``root`` expands to more than :data:`MAX_YAML_NODES`
    values or nests deeper than :data:`MAX_YAML_DEPTH` (aliases counted at every use)."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    todo: list[tuple[yaml.Node, bool]] = [(root, False)]
    while todo:  # iterative post-order walk over the (shared) nodes: no recursion
        node, done = todo.pop()
        if id(node) in size:
            continue
        kids = _children(node)
        if not done:
            todo.append((node, True))
            todo += [(k, False) for k in kids if id(k) not in size]
            continue
        size[id(node)] = min(1 + sum(size.get(id(k), 0) for k in kids), MAX_YAML_NODES + 1)
        depth[id(node)] = 1 + max((depth.get(id(k), 0) for k in kids), default=0)
        if depth[id(node)] > MAX_YAML_DEPTH:
            raise ConfigError(
                "",
                f"{source} nests deeper than {MAX_YAML_DEPTH} levels (line "
                f"{node.start_mark.line + 1}); flatten it",
            )
    if size[id(root)] > MAX_YAML_NODES:
        raise ConfigError(
            "",
            f"{source} expands to more than {MAX_YAML_NODES} values (its anchors/aliases "
            "repeat one another); write the values out or use fewer nested aliases",
        )


MERGE_TAG = "tag:yaml.org,2002:merge"
"""The tag of a ``<<`` merge key (``<<: *defaults``): not a config key of its own."""


def _duplicate_key(root: yaml.Node, source: str, key: str = "") -> None:
    """ConfigError when a mapping gives one key twice (PyYAML keeps the last silently), naming
    the dotted key and both lines."""
    todo: list[tuple[yaml.Node, str]] = [(root, key)]
    seen: set[int] = set()
    while todo:
        node, where = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            todo += [(item, f"{where}[{i}]") for i, item in enumerate(node.value)]
        if not isinstance(node, yaml.MappingNode):
            continue
        lines: dict[tuple[str, str], int] = {}
        for k, v in node.value:
            name = str(k.value) if isinstance(k, yaml.ScalarNode) else ""
            dotted = f"{where}.{name}" if where else name
            if isinstance(k, yaml.ScalarNode) and k.tag != MERGE_TAG:
                line = k.start_mark.line + 1
                if (k.tag, name) in lines:
                    raise ConfigError(
                        dotted[:120],
                        f"{source} gives it twice (lines {lines[k.tag, name]} and {line}); the "
                        "second would silently replace the first: keep one",
                    )
                lines[k.tag, name] = line
            todo.append((v, dotted))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


PLAIN_TYPES = (str, int, float, bool, type(None))
"""What a config value may be besides mappings and lists: JSON's types."""


def check_plain(value: object, key: str, source: str) -> None:
    """ConfigError naming the dotted key of the first value that is not a JSON type (a YAML
    date, ``!!binary`` bytes, a ``!!set``, ``!!omap`` pairs)."""
    todo = [(value, key)]
    while todo:
        v, k = todo.pop()
        if isinstance(v, dict):
            for sub, item in v.items():
                if not isinstance(sub, PLAIN_TYPES):
                    raise ConfigError(
                        k,
                        f"{source}: a key of type {type(sub).__name__} "
                        f"({str(sub)[:40]!r}); write keys as plain strings",
                    )
                todo.append((item, f"{k}.{sub}" if k else str(sub)))
        elif isinstance(v, list):
            todo += [(item, f"{k}[{i}]") for i, item in enumerate(v)]
        elif not isinstance(v, PLAIN_TYPES):
            name = type(v).__name__
            kind, fix = _NOT_PLAIN.get(name, (name, "write a plain string, number or list"))
            raise ConfigError(
                k,
                f"{source}: {kind} ({str(v)[:40]!r}) is not a plain value (string, number, "
                f"true/false, list or mapping); {fix}",
            )


_NOT_PLAIN = {
    "date": ("a date", "quote it to make it a string, e.g. '2026-11-25'"),
    "datetime": ("a date", "quote it to make it a string, e.g. '2026-11-25 10:00'"),
    "bytes": ("!!binary bytes", "write a plain string instead of !!binary"),
    "set": ("a !!set", "write a list instead, e.g. [de, es]"),
}
"""Non-JSON values PyYAML's safe loader builds: what to call them and the fix."""


def load_yaml(text: str, source: str, key: str = "") -> Any:
    """Parse config YAML safely: at most :data:`MAX_YAML_BYTES`, :data:`MAX_YAML_ENTRIES` lines
    and commas, :data:`MAX_YAML_NODES` values (aliases expanded) and :data:`MAX_YAML_DEPTH`
    levels (refused before parsing when visible in the text: :func:`prescan`), no key given
    twice in one mapping, JSON types only; else ConfigError naming ``source`` (and the dotted
    ``key`` under which the text sits)."""
    if len(text) > MAX_YAML_BYTES:
        raise ConfigError(
            key,
            f"{source} has {len(text)} characters, more than a config holds "
            f"({MAX_YAML_BYTES}); point to the right file",
        )
    prescan(text, source, key)
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        _too_big(root, source)
        _duplicate_key(root, source, key)
        data = loader.construct_document(root)
    except RecursionError:
        raise ConfigError(
            key, f"{source} nests deeper than {MAX_YAML_DEPTH} levels; flatten it"
        ) from None
    except yaml.YAMLError as e:
        msg = " ".join(str(e).split())[:300]
        raise ConfigError(key, f"{source} is not valid YAML: {msg}") from None
    finally:
        loader.dispose()
    check_plain(data, key, source)
    return data


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``a.b.c=value`` overrides (values parsed as YAML) to a nested mapping."""
    check_plain(data, "", "the config")
    out = json.loads(json.dumps(data))
    for item in overrides:
        if "=" not in item:
            raise ConfigError(item, "overrides look like key.sub=value (e.g. arca.steps=50)")
        dotted, raw = item.split("=", 1)
        parts = dotted.strip().split(".")
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(dotted, f"'{p}' is not a section")
        try:
            node[parts[-1]] = load_yaml(raw, "the override", dotted) if raw.strip() else ""
        except ConfigError as e:
            if "not valid YAML" not in str(e):
                raise
            raise ConfigError(
                dotted,
                f"value {raw[:80]!r} is not valid YAML; quote it, e.g. key='text'",
            ) from None
    return out
