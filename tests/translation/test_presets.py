"""pass@k presets reproduce paper 004 Table 15."""

from __future__ import annotations

import pytest

from lira.translation.presets import pass_at_k_preset
from tests.test_paper_defaults import TABLE_15 as PAPER_TABLE_15

TABLE_15 = {k: [name.lower() for name in row] for k, row in PAPER_TABLE_15.items()}
"""Paper Table 15 (pinned in tests/test_paper_defaults.py) in the presets' translator names."""


@pytest.mark.parametrize("k", range(5))
def test_table_15_rows(k):
    active = pass_at_k_preset(k).active_translators()
    assert sorted(t.name for t in active) == sorted(TABLE_15[k])
    assert sum(t.role == "llm" for t in active) == k and len(active) == 4


def test_out_of_range():
    with pytest.raises(ValueError, match="pass@5"):
        pass_at_k_preset(5)
