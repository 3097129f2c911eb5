"""The baseline methods a user can select: name -> where its method object lives.

This is the table of :mod:`lira.baselines.registry` (which resolves its entries and lets tests
and plugins :func:`~lira.baselines.registry.register` more). It is a module of its own
because :mod:`lira.baselines.config` validates ``baselines.methods`` against it: it must stay
import-light, so this module (like the package's ``__init__``) imports nothing. The entries
are ``"module:attribute"`` strings, imported only when a method is used.
"""

from __future__ import annotations

METHODS: dict[str, object] = {
    "infonce": "lira.baselines.infonce:METHOD",  # CLEAR's baseline (paper 000 §4.2)
    "clear": "lira.baselines.clear:METHOD",  # paper 000
    "lancer": "lira.baselines.lancer:METHOD",  # paper 002
    "jsd": "lira.baselines.jsd:METHOD",  # paper 003
    "merging": "lira.baselines.merging:METHOD",  # paper 001
}
"""Methods a user can select (``baselines.methods``, ``--methods``); the default is all, in order.
A value is a ``"module:attribute"`` string or a registered method object (this module imports
no method class to name its type)."""


def method_names() -> list[str]:
    """The selectable method names, in registry order."""
    return list(METHODS)
