"""pass@k presets reproduce paper 004 Table 15."""

from __future__ import annotations

import pytest

from lira.translation.presets import pass_at_k_preset

TABLE_15 = {
    0: ["opus", "m2m", "n600", "n3b"],
    1: ["llama", "opus", "m2m", "n3b"],
    2: ["llama", "gemma", "m2m", "n3b"],
    3: ["llama", "gemma", "qwen", "n3b"],
    4: ["llama", "gemma", "qwen", "ds-r1"],
}


@pytest.mark.parametrize("k", range(5))
def test_table_15_rows(k):
    active = pass_at_k_preset(k).active_translators()
    assert sorted(t.name for t in active) == sorted(TABLE_15[k])
    assert sum(t.role == "llm" for t in active) == k and len(active) == 4


def test_out_of_range():
    with pytest.raises(ValueError, match="pass@5"):
        pass_at_k_preset(5)
