"""The rows of paper 004's Table 5 that ``lira ablate`` trains (:mod:`pipeline.ablate`).

Apart from the engine so that ``lira --help`` lists them (``--rows``) without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AblationRow:
    """One row of Table 5."""

    name: str
    """Folder name under ``<output_dir>/ablations/`` and the ``--rows`` value."""
    label: str
    """The row's name in paper 004's Table 5."""
    overrides: tuple[str, ...]
    """Dotted config overrides that remove the component."""


ROWS: dict[str, AblationRow] = {
    r.name: r
    for r in (
        AblationRow("full", "LiRA (full)", ()),
        AblationRow("no-llm-critic", "– LLM critic", ("arca.use_llm_critic=false",)),
        AblationRow("no-embeds-critic", "– Embeds critic", ("arca.use_embedding_critic=false",)),
        AblationRow("no-translations", "– Translations", ("lasr.use_translations=false",)),
        AblationRow("no-multi-enc", "– Multi-enc", ("lasr.use_multilingual_encoder=false",)),
        AblationRow("no-queue", "– FIFO queue", ("lasr.use_queue=false",)),
    )
}
"""Table 5's rows in the paper's order."""
