"""The baseline methods ``lira baseline`` can train: name -> where its method object lives.

Adding a baseline is one new file that defines a :class:`~lira.baselines.method.BaselineMethod`
(the data it needs, how it draws a batch and computes its loss) plus one line in
:data:`METHODS`, the table of :mod:`lira.baselines.names` (it imports nothing, so that
:mod:`lira.baselines.config` validates ``baselines.methods`` against it without importing a
method before it is used); a paper recipe of its own, ``baselines.<name>.*``, is declared in
:mod:`lira.baselines.recipes` (no torch either). The entries are ``"module:attribute"`` strings, imported only when a method is used.
A value may also be the method object itself (tests and plugins register one with
:func:`register`, into the same table). A resolved method is typed ``Any``: this module
imports no method module, so it cannot name :class:`~lira.baselines.method.BaselineMethod`.
"""

from __future__ import annotations

import importlib
from typing import Any

from lira.baselines.names import METHODS, method_names

__all__ = ["METHODS", "PARTS", "all_methods", "get_method", "method_names", "register"]

PARTS: dict[str, object] = {
    "gist": "lira.baselines.merging:GIST",  # one fine-tune of paper 001's merging
}
"""Objectives other methods train with, not selectable on their own."""


def register(name: str, method: object) -> None:
    """Add (or replace) a selectable method: a method object (its ``config_class`` is its recipe
    section) or a ``"module:attribute"`` (its recipe, if any, from ``recipes.RECIPES``)."""
    METHODS[name] = method


def _resolve(entry: object) -> Any:
    if not isinstance(entry, str):
        return entry
    module, _, attr = entry.partition(":")
    return getattr(importlib.import_module(module), attr)


def get_method(name: str, parts: bool = False) -> Any:
    """The method object registered as ``name`` (with ``parts``: also the inner objectives);
    ``ValueError`` naming the choices when there is none."""
    table = {**METHODS, **PARTS} if parts else METHODS
    if name not in table:
        raise ValueError(f"unknown baseline method '{name}'; choose from {list(table)}")
    return _resolve(table[name])


def all_methods() -> dict[str, Any]:
    """Every registered method and part, resolved: name -> method object."""
    return {name: _resolve(entry) for name, entry in {**METHODS, **PARTS}.items()}
