"""The leaderboard opens with a short summary in the README's names, and every plot gives a
method one colour at a readable size, with a per-language chart (issue 40 item 7)."""

from __future__ import annotations

from evaluators import leaderboard
from evaluators.leaderboard import leaderboard_markdown, method_color, write_leaderboard


def _rows() -> list[dict]:
    rows = []
    for m, base in (("backbone", 30.0), ("lira", 60.0), ("me5-small", 55.0)):
        for sc, shift in (("en-en", 20.0), ("lang-en", 0.0), ("multi", -5.0)):
            for lang, d in (("all", 0.0), ("de", 1.0), ("ru", -1.0)):
                for metric in ("ndcg@10", "mrr@10"):
                    v = base + shift + d
                    rows.append(dict(method=m, task="t", scenario=sc, language=lang,
                                     metric=metric, value=v, ci_low=v - 2, ci_high=v + 2))  # fmt: skip
    return rows


def test_the_leaderboard_opens_with_a_summary_in_the_readmes_names():
    md = leaderboard_markdown(_rows(), "T")
    summary_at = md.index("## Summary: ndcg@10, every language pooled")
    assert summary_at < md.index("## ndcg@10 by scenario: all")  # before the details
    table = md[summary_at:].split("\n\n")[1].splitlines()
    assert table[0] == "| method | En-En | L→En | Multi |"
    assert table[2:] == ["| backbone | 50.0 | 30.0 | 25.0 |", "| lira | 80.0 | 60.0 | 55.0 |",
                         "| me5-small | 75.0 | 55.0 | 50.0 |"]  # fmt: skip


def test_one_colour_per_method_across_plots_and_a_readable_size(tmp_path, monkeypatch):
    figures = []
    real = leaderboard.save_figure

    def keep(fig, path):
        figures.append((path.name, fig))
        return real(fig, path)

    monkeypatch.setattr(leaderboard, "save_figure", keep)
    rows = _rows()
    many = [dict(r, scenario=f"{r['scenario']}-{k}") for r in rows for k in range(6)]
    files = write_leaderboard(rows + many, tmp_path)
    assert "by_language" in files and files["by_language"].name == "ndcg_at_10_by_language.png"
    colours: dict[str, set[str]] = {}
    for name, fig in figures:
        width, _ = fig.get_size_inches()
        assert width * 110 <= 1300, name  # was 1.4 in per scenario: 2530 px with 20 scenarios
        ax = fig.axes[0]
        for container in ax.containers:
            label = container.get_label()
            if hasattr(container, "patches"):
                for patch in container.patches:
                    colours.setdefault(label, set()).add(patch.get_facecolor())
    assert set(colours) == {"backbone", "lira", "me5-small"}
    assert all(len(c) == 1 for c in colours.values()), colours  # the same colour everywhere
    assert len({next(iter(c)) for c in colours.values()}) == 3  # and a different one each
    lang_fig = dict(figures)["ndcg_at_10_by_language.png"]
    ticks = [t.get_text() for t in lang_fig.axes[0].get_xticklabels()]
    assert ticks == ["de", "ru"]


def test_a_methods_colour_does_not_depend_on_the_other_methods(tmp_path, monkeypatch):
    figures = []
    monkeypatch.setattr(leaderboard, "save_figure", lambda fig, path: figures.append(fig) or path)
    rows = _rows()
    leaderboard.plot_metric(rows, "ndcg@10", tmp_path / "a.png")
    leaderboard.plot_metric([r for r in rows if r["method"] != "backbone"], "ndcg@10",
                            tmp_path / "b.png")  # fmt: skip

    def colour(fig, method):
        bars = next(c for c in fig.axes[0].containers if c.get_label() == method)
        return bars.patches[0].get_facecolor()

    assert colour(figures[0], "lira") == colour(figures[1], "lira")  # was the 2nd, then 1st
    assert method_color("backbone") != method_color("merging")  # both blue before
