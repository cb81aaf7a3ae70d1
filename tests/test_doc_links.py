"""Every link of the repository's markdown pages leads somewhere a reader has: the file exists in
the repository, the anchor is a heading of it, and no page sends a reader to a document that is not
in the repository (issue 44: ten mentions of a FACTS.md no user has)."""

from __future__ import annotations

from pathlib import Path

from tests import doc_links

REPO = Path(__file__).resolve().parent.parent


def test_every_link_and_anchor_of_every_page_holds():
    broken = doc_links.broken(REPO)
    assert not broken, "links that lead nowhere:\n" + "\n".join(broken)


def test_the_walk_reads_the_pages_a_user_reads():
    found = {p.relative_to(REPO).as_posix() for p in doc_links.pages(REPO)}
    assert {"README.md", "CHANGELOG.md", "benchmarks/README.md", "docs/matrix.md"} <= found
    assert any(name.startswith("docs/studies/") for name in found)
    assert any(name.startswith("studies/") for name in found)
    assert not any(name.startswith(".venv/") for name in found)


def test_anchors_follow_githubs_rule():
    page = "# The `bench` CLI: one page\n\n## Runs (N)\n\n## Runs (N)\n\n```\n# not a heading\n```\n"
    assert doc_links.anchors(page) == {"the-bench-cli-one-page", "runs-n", "runs-n-1"}
    assert doc_links.anchor("Data-parallel runs, 2 × 1") == "data-parallel-runs-2--1"


def test_a_planted_broken_link_anchor_and_outside_document_are_found(tmp_path: Path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\n## Kept\n")
    (tmp_path / "README.md").write_text(
        "# R\n\n[ok](docs/a.md#kept) [self](#r) [web](https://example.org/x.md)\n"
        "[gone](docs/b.md) [anchor](docs/a.md#lost) [out](../elsewhere.md)\n"
        "As FACTS.md says; see docs/results.md. `[code](nowhere.md)` and docs/studies/NAME.md are fine.\n"
        "```\n[fenced](nowhere.md)\n```\n"
        "\n| a | b |\n|---|---|\n| 1 | 2 |\n\nA paragraph.\n| 3 | 4 |\n"
    )
    assert doc_links.broken(tmp_path) == [
        "README.md:4: docs/b.md: no such file",
        "README.md:4: docs/a.md#lost: no heading in a.md has the anchor #lost",
        "README.md:4: ../elsewhere.md: outside the repository, a file a user of the project does not have",
        "README.md:5: names FACTS.md, which is not in the repository",
        "README.md:5: names docs/results.md, which is not in the repository",
        "README.md:15: a table row after a paragraph, outside its table",
    ]
