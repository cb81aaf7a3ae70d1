"""`bench report --table versions` and `--compare version:A version:B` (issue 43) on hand-built
databases: runs whose figures and recorded framework versions the test chose, so each verdict has a
known answer (a time that halves between two releases is a change of ×0.50; noise is not)."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.report.query.versions import Release, parse_side, release_key
from tests.studies_db import FAST, NOISY_A, NOISY_B, SLOW, write_db

# (settings, the release its runs recorded, their seconds per image)
Cell = tuple[dict[str, object], str | None, Sequence[float]]

ALEXNET = {"framework": "mxnet", "model": "alexnet", "batch_size": 8}
RESNET = {"framework": "mxnet", "model": "resnet50", "batch_size": 8}
LONELY = {"framework": "pytorch", "model": "alexnet", "batch_size": 8}
# 1.10.0 after 1.9.1, as PEP 440 orders them (as text it would come first). alexnet's time halves
# at 1.9.1 and holds at 1.10.0; resnet50's runs are noise around one figure throughout.
CELLS: list[Cell] = [
    (ALEXNET, "1.10.0", FAST),
    (ALEXNET, "1.8.0", SLOW),
    (ALEXNET, "1.9.1", [f * 1.002 for f in FAST]),
    (RESNET, "1.8.0", NOISY_A),
    (RESNET, "1.9.1", NOISY_B),
    (LONELY, "2.4.1", FAST),
]


def _epochs(figures: Sequence[float]) -> dict[str, list[float] | int]:
    """Each run's epochs as a real run records them: 10 steps of 8 images, its figure the median
    epoch's, the fastest and slowest epoch 1 % either side."""
    images = 10 * 8
    return {
        "steps_per_epoch": 10,
        "timed_epochs": 3,
        "median_epoch_seconds": [f * images for f in figures],
        "min_epoch_seconds": [f * images * 0.99 for f in figures],
        "max_epoch_seconds": [f * images * 1.01 for f in figures],
    }


def versioned_db(path: Path, cells: Sequence[Cell]) -> str:
    """write_db's database, each cell's runs with an environments row naming its release (None: no
    row, as a run that ended before its worker reported). One sweep: the same configuration's
    releases get run indexes of their own, as a version axis's runs of one sweep would be told apart."""
    offsets, seen = [], 0
    for _, _, figures in cells:
        offsets.append(seen)
        seen += len(figures)
    url = write_db(
        path,
        [
            (settings, figures, {"run_index": [offset + i for i in range(len(figures))], **_epochs(figures)})
            for (settings, _, figures), offset in zip(cells, offsets, strict=True)
        ],
    )
    versions = [version for _, version, figures in cells for _ in figures]
    conn = sqlite3.connect(path)
    try:
        ids = [row[0] for row in conn.execute("SELECT id FROM runs ORDER BY id")]
        for run_id, version in zip(ids, versions, strict=True):
            if version is not None:
                conn.execute(
                    "INSERT INTO environments (run_id, framework_version) VALUES (?, ?)", (run_id, version)
                )
        conn.commit()
    finally:
        conn.close()
    return url


def report(cli, db: str, *args: str):
    result = cli("report", "--db", db, *args)
    return result


def rows_of(cli, db: str, *args: str) -> list[dict]:
    result = report(cli, db, "--table", "versions", "--format", "json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["rows"]


def test_releases_sort_as_pep_440_and_any_other_text_after_them():
    found = sorted(
        ["1.10.0", "r10", "1.9.1", None, "2.0.0", "r9", "2.0.0rc1", "0.4.30", "\x1b[31m"], key=release_key
    )
    assert found == ["0.4.30", "1.9.1", "1.10.0", "2.0.0rc1", "2.0.0", "\x1b[31m", "r9", "r10", None]
    # Numbers of any length, in order, without int() (past 4300 digits it raises).
    assert sorted(["r" + "9" * 5000, "r" + "9" * 4999, "r010"], key=release_key)[0] == "r010"
    assert release_key("r" + "9" * 4999) < release_key("r" + "9" * 5000)


def test_a_time_that_halves_is_a_change_and_noise_is_not(cli, tmp_path):
    db = versioned_db(tmp_path / "v.db", CELLS)
    rows = rows_of(cli, db)
    alexnet = [r for r in rows if r["framework"] == "mxnet" and r["model"] == "alexnet"]
    assert [r["framework_version"] for r in alexnet] == ["1.8.0", "1.9.1", "1.10.0"]
    first, halved, held = alexnet
    assert first["change"] == "first release" and first["changed"] is None
    assert halved["changed"] is True and halved["previous_version"] == "1.8.0"
    assert halved["change_ratio"] == pytest.approx(0.5, rel=0.01)
    assert halved["change_high"] < 1 and halved["change_low"] > 0.45
    assert halved["adjusted_p"] < 0.05 and halved["change"].startswith("faster ×0.50 [")
    assert held["changed"] is False and held["change"].startswith("within the noise")
    assert all(r["n"] == 5 for r in alexnet)
    resnet = [r for r in rows if r["model"] == "resnet50"]
    assert [r["changed"] for r in resnet] == [None, False]
    text = report(cli, db, "--table", "versions").output
    assert "changed: mxnet alexnet cpu graph (default) at 1.9.1 (from 1.8.0): faster ×0.50 [" in text
    assert "changed: mxnet resnet50" not in text
    assert "Holm-corrected over the configuration's steps" in text


def test_a_configuration_with_one_release_says_so(cli, tmp_path):
    db = versioned_db(tmp_path / "v.db", CELLS)
    (lonely,) = [r for r in rows_of(cli, db) if r["framework"] == "pytorch"]
    assert lonely["change"] == "one release only" and lonely["releases"] == 1
    text = report(cli, db, "--table", "versions").output
    assert "1 configurations ran one release only: nothing to compare" in text


def test_a_release_with_too_few_runs_is_passed_over_and_said(cli, tmp_path):
    cells: list[Cell] = [(ALEXNET, "1.8.0", SLOW), (ALEXNET, "1.9.1", FAST[:1]), (ALEXNET, "1.10.0", FAST)]
    rows = rows_of(cli, versioned_db(tmp_path / "v.db", cells))
    assert rows[1]["change"] == "fewer than 2 ok runs: no verdict"
    assert rows[2]["previous_version"] == "1.8.0" and rows[2]["changed"] is True
    assert rows[2]["change"].endswith(", against 1.8.0")


# A number past Python's int() digit limit (4300) among them: PEP 440's parser raises ValueError on it.
HOSTILE = ["\x1b]0;owned\x07\x1b[31m1.0", '=HYPERLINK("http://x")', "2.0|<b>[x](y)</b>$a$", "9" * 5000]


def test_hostile_versions_in_a_shared_database_are_shown_escaped(cli, tmp_path):
    cells: list[Cell] = [(ALEXNET, version, FAST) for version in HOSTILE] + [(RESNET, None, FAST)]
    db = versioned_db(tmp_path / "v.db", cells)
    text = report(cli, db, "--table", "versions")
    assert text.exit_code == 0, text.output
    assert "\x1b" not in text.output and "\x07" not in text.output
    assert "\\x1b]0;owned" in text.output
    assert "9" * 50 not in text.output  # cut in the table; CSV and JSON keep it whole
    assert "unrecorded" in text.output
    markdown = report(cli, db, "--table", "versions", "--format", "markdown").output
    assert "<b>" not in markdown and "\\|<b>" not in markdown and "&lt;b&gt;" in markdown
    table = list(
        csv.DictReader(io.StringIO(report(cli, db, "--table", "versions", "--format", "csv").output))
    )
    versions = [r["framework_version"] for r in table]
    assert '\'=HYPERLINK("http://x")' in versions and "9" * 5000 in versions
    assert {r["framework_version"] for r in rows_of(cli, db)} >= {"9" * 5000, HOSTILE[0]}


def test_the_page_draws_releases_where_a_framework_ran_several(cli, tmp_path):
    db = versioned_db(tmp_path / "v.db", CELLS + [(RESNET, "$\\frac{1}{0}$", FAST)])
    result = report(cli, db, "--html", str(tmp_path / "site"))
    assert result.exit_code == 0, result.output
    page = (tmp_path / "site" / "index.html").read_text()
    assert "Framework releases" in page
    assert list((tmp_path / "site" / "plots").glob("versions-mxnet-*.png"))
    only_one = versioned_db(tmp_path / "one.db", [(LONELY, "2.4.1", FAST)])
    assert report(cli, only_one, "--html", str(tmp_path / "one")).exit_code == 0
    assert "Framework releases" not in (tmp_path / "one" / "index.html").read_text()


def test_compare_two_releases_as_two_sweeps(cli, tmp_path):
    db = versioned_db(tmp_path / "v.db", CELLS)
    result = report(cli, db, "--compare", "version:1.8.0", "version:1.9.1", "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert "1.8.0 (A) against 1.9.1 (B)" in document["title"]
    by_model = {r["model"]: r for r in document["rows"]}
    assert set(by_model) == {"alexnet", "resnet50"}  # pytorch ran neither release
    assert by_model["alexnet"]["verdict"] == "faster" and by_model["alexnet"]["ratio_high"] < 1
    assert "Holm correction over 2 comparisons" in by_model["alexnet"]["method"]
    assert by_model["resnet50"]["verdict"].startswith("no difference detected")
    narrowed = report(cli, db, "--compare", "version:1.8.0", "version:1.9.1", "--where", "model=alexnet")
    assert narrowed.exit_code == 0 and "resnet50" not in narrowed.output


def test_compare_refuses_a_release_no_run_recorded_and_a_mixed_pair(cli, tmp_path):
    db = versioned_db(tmp_path / "v.db", CELLS)
    missing = report(cli, db, "--compare", "version:1.8.0", "version:9.9")
    assert missing.exit_code == 1
    assert (
        "version:9.9: no run read recorded that version (recorded: 1.8.0, 1.9.1, 1.10.0, 2.4.1)"
        in missing.output
    )
    mixed = report(cli, db, "--compare", "1", "version:1.8.0")
    assert mixed.exit_code == 1 and "not one of each" in mixed.output
    assert report(cli, db, "--compare", "version:1.8.0", "version:1.9.1", "--table", "batch").exit_code == 1


@pytest.mark.parametrize("text", ["version:", "version:   ", "version:" + "1" * 300, "x1"])
def test_a_bad_side_is_one_line(text):
    with pytest.raises(ConfigError) as found:
        parse_side(text)
    assert "\n" not in str(found.value) and str(found.value).startswith("--compare")


def test_a_side_reads_a_sweep_id_or_a_release():
    assert parse_side("3") == 3
    assert parse_side("version:0.4.30") == Release("0.4.30")


def test_releases_that_ran_different_numbers_of_runs_are_one_configuration(cli, tmp_path):
    # `runs` is not part of a configuration's identity (its hash), nor is the count of its runs.
    cells: list[Cell] = [({**ALEXNET, "runs": 5}, "1.8.0", SLOW), ({**ALEXNET, "runs": 4}, "1.9.1", FAST[:4])]
    rows = rows_of(cli, versioned_db(tmp_path / "v.db", cells))
    assert [(r["framework_version"], r["releases"]) for r in rows] == [("1.8.0", 2), ("1.9.1", 2)]
    assert rows[1]["changed"] is True and rows[1]["change"].startswith("faster ×0.50")


def test_runs_apart_at_an_n_the_test_cannot_refuse_are_not_shown_never_within_the_noise(cli, tmp_path):
    # Three runs against three: the exact test's smallest two-sided p is 0.1, so a time that halves
    # cannot be called a change, and calling it "within the noise" would claim what was never tested.
    cells: list[Cell] = [(ALEXNET, "1.8.0", SLOW[:3]), (ALEXNET, "1.9.1", FAST[:3])]
    rows = rows_of(cli, versioned_db(tmp_path / "v3.db", cells))
    halved = [r for r in rows if r["framework_version"] == "1.9.1"][0]
    assert halved["changed"] is False and halved["adjusted_p"] >= 0.1
    assert halved["change"].startswith("not shown at n=3: the test cannot reach 5% there ×0.50 ["), halved
