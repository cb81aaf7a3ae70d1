"""`bench run --dry-run` shows, per configuration, the settings in which configurations differ."""

from __future__ import annotations


def _table(output: str) -> list[list[str]]:
    lines = output.splitlines()
    end = next(i for i, line in enumerate(lines) if line.startswith("differ:"))
    return [line.split() for line in lines[:end] if not line.startswith("-")]


def test_the_columns_are_the_settings_that_differ(write_matrix, cli, workdir):
    write_matrix("""
        settings: {framework: pytorch, image_size: 32, epochs: 2}
        axes:
          threads: [1, 2]
          batch_size: [8, 16]
    """)
    result = cli("run", "--matrix", "m.yaml", "--dry-run")
    assert result.exit_code == 0, result.output
    header, *rows = _table(result.output)
    assert header == ["#", "config_hash", "batch_size", "threads"]
    assert [r[2:] for r in rows] == [["8", "1"], ["16", "1"], ["8", "2"], ["16", "2"]]
    assert "differ: batch_size, threads" in result.output
    common = next(line for line in result.output.splitlines() if line.startswith("common to all:"))
    assert "framework=pytorch" in common and "image_size=32" in common and "epochs=2" in common
    assert "threads=" not in common and "batch_size=" not in common
    assert "4 configurations, 4 to run" in result.output
    assert not (workdir / "bench.db").exists()


def test_a_difference_the_label_hides_is_shown(write_matrix, cli):
    """Two configurations whose labels are equal (the label has no seed) are told apart."""
    write_matrix("settings: {framework: pytorch}\naxes:\n  seed: [1, 2]\n")
    result = cli("run", "--matrix", "m.yaml", "--dry-run")
    header, *rows = _table(result.output)
    assert header[2:] == ["seed"] and [r[2] for r in rows] == ["1", "2"]


def test_resume_marks_what_is_finished(write_matrix, cli):
    write_matrix("axes:\n  framework: [fault]\n  fault: [ok, raise]\n")
    assert cli("run", "--matrix", "m.yaml", "--only", "fault=ok").exit_code == 0
    result = cli("run", "--matrix", "m.yaml", "--dry-run", "--resume")
    header, first, second = _table(result.output)
    assert first[2] == "ok" and "finished," in first and "finished," not in second
    assert "2 configurations, 1 to run" in result.output
