"""Cut the demo subset of XQuAD-R shipped in lira/data/demo/xquad-r/ (deterministic).

Takes the first 2 paragraphs of every article (same positions in every language, so question
ids match), for en/de/es/ru/zh, keeping the original XQuAD-R JSON structure.

    python scripts/make_demo_subset.py /path/to/xquad-r lira/data/demo/xquad-r
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

LANGS = ("en", "de", "es", "ru", "zh")
PARAGRAPHS_PER_ARTICLE = 2


def main(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    ids = None
    for lang in LANGS:
        data = json.loads((src / f"{lang}.json").read_text(encoding="utf-8"))
        articles = [
            {"title": a.get("title", ""), "paragraphs": a["paragraphs"][:PARAGRAPHS_PER_ARTICLE]}
            for a in data["data"]
        ]
        qids = [q["id"] for a in articles for p in a["paragraphs"] for q in p["qas"]]
        if ids is None:
            ids = qids
        assert qids == ids, f"{lang}: question ids differ from {LANGS[0]}"
        out = {"version": data.get("version", ""), "data": articles}
        (dst / f"{lang}.json").write_text(
            json.dumps(out, ensure_ascii=False, separators=(",", ":")), encoding="utf-8"
        )
        print(lang, len(qids), "questions")
    shutil.copy(src / "LICENSE", dst / "LICENSE")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
