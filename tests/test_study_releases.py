"""A study's releases matrix (orchestrator/studies/releases.py, releases_report.py): its published
table at older releases beside today's, on a hand-built database whose answers are known: MXNet
twice as slow at its newer release, TensorFlow the same at both, PyTorch at one release only. Then
the `releases:` key's errors, the html page's escaping, and the shipped umons study's key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.storage.db import Database
from orchestrator.studies import loader, measured, releases
from orchestrator.studies import published as published_table
from orchestrator.studies import report as study_report
from tests.studies_db import FAST, NOISY_A, NOISY_B, SLOW, write_db, write_study

REPO = Path(__file__).resolve().parent.parent
REL = """\
name: rel
settings: {device: cpu, threads: 2, batch_size: 8}
axes:
  framework: [pytorch, tensorflow, mxnet]
  version: ["2.13.0", "2.16.2", "2.21.0", "1.6.0", "1.9.1"]
  model: [alexnet, resnet50]
exclude:
  - {framework: pytorch, version: "2.16.2"}
  - {framework: pytorch, version: "2.21.0"}
  - {framework: pytorch, version: "1.6.0"}
  - {framework: pytorch, version: "1.9.1"}
  - {framework: tensorflow, version: "2.13.0"}
  - {framework: tensorflow, version: "1.6.0"}
  - {framework: tensorflow, version: "1.9.1"}
  - {framework: mxnet, version: "2.13.0"}
  - {framework: mxnet, version: "2.16.2"}
  - {framework: mxnet, version: "2.21.0"}
"""
TABLE = """\
  - path: rel.yaml
    scale: cpu
published:
  - name: poster
    file: published/p.csv
    unit: s
    row: a framework's time on a model
    value: value
    columns: model
    measured: {device: cpu, batch_size: 8}
claims:
  - {id: pt-fastest, kind: fastest, text: t, source: s, who: pytorch, in: [every], columns: model,
     where: {batch_size: 8}}
"""
# The poster: on AlexNet PyTorch and MXNet level, TensorFlow twice; on ResNet50 PyTorch and
# TensorFlow level, MXNet twice.
CSV = (
    "framework,model,value,note\n"
    "pytorch,alexnet,10,\ntensorflow,alexnet,20,\nmxnet,alexnet,10,\nsinga,alexnet,30,\n"
    "pytorch,resnet50,10,\ntensorflow,resnet50,10,\nmxnet,resnet50,20,\nsinga,resnet50,30,\n"
)
RELEASES = """\
releases:
  matrix: rel.yaml
  published: poster
  columns: model
  note: The poster's releases were those of 2019.
"""
OLD_MXNET = [x * 1.05 for x in FAST]  # MXNet 1.6.0: near PyTorch, as in the poster
TWICE = [x * 2 for x in FAST]


def _cells(runs: int = 5) -> list:
    """Today MXNet 1.9.1 is twice its 1.6.0; TensorFlow's two releases are the same (noise only)."""
    found = []
    for model in ("alexnet", "resnet50"):
        for framework, version, figures in (
            ("pytorch", "2.13.0", FAST),
            ("mxnet", "1.6.0", OLD_MXNET),
            ("mxnet", "1.9.1", TWICE),
            ("tensorflow", "2.16.2", [x * 2 for x in NOISY_A]),
            ("tensorflow", "2.21.0", [x * 2 for x in NOISY_B]),
        ):
            settings = {"framework": framework, "version": version, "model": model, "batch_size": 8}
            found.append((settings, figures[:runs], {}))
    return found


def _study(tmp_path: Path, tail: str = RELEASES, rel: str = REL) -> Path:
    folder = write_study(tmp_path / "studies", TABLE + tail)
    (folder / "rel.yaml").write_text(rel)
    (folder / "published").mkdir(exist_ok=True)
    (folder / "published" / "p.csv").write_text(CSV)
    return folder


def _report(tmp_path: Path, fmt: str = "text", tail: str = RELEASES, runs: int = 5) -> str:
    study = loader.load_study(_study(tmp_path, tail))
    path = tmp_path / "t.db"
    # The study's ranking sweep (today's releases, no version named) and its releases sweep.
    ranking = [({"framework": f, "model": m, "batch_size": 8}, SLOW if f != "pytorch" else FAST, {})
               for f in ("pytorch", "tensorflow", "mxnet") for m in ("alexnet", "resnet50")]  # fmt: skip
    write_db(path, ranking)
    url = write_db(path, _cells(runs), sweep="study t/cpu: rel")
    db = Database(url, create=False)
    try:
        return study_report.report(study, measured.read(db, study, "cpu"), fmt)
    finally:
        db.close()


def _between(text: str, start: str, end: str) -> str:
    return text[text.index(start) : text.index(end, text.index(start))]


def test_each_release_against_the_one_before_a_known_change_and_none(tmp_path):
    out = _report(tmp_path, "markdown")
    steps = _between(out, "### Each framework's releases", "### The ranking per era")
    mxnet = [line for line in steps.splitlines() if line.startswith("| mxnet | alexnet | 1.9.1")]
    assert len(mxnet) == 1 and mxnet[0].endswith("| slower |"), steps
    assert re.search(r"\| 1\.9[0-9] \\\[1\.[89][0-9]–[12]\.[0-9]{2}\\\], n=5/5 \|", mxnet[0]), mxnet[0]
    tensorflow = [line for line in steps.splitlines() if line.startswith("| tensorflow | resnet50 | 2.21.0")]
    assert tensorflow[0].endswith("| no change shown at this n |"), tensorflow
    assert "| pytorch |" not in steps  # one release: nothing to step between


def test_the_eras_and_the_share_the_old_releases_close(tmp_path):
    out = _report(tmp_path)
    section = _between(out, "How much the releases explain", "What the releases cannot reach")
    # MXNet on AlexNet: about 2× the fastest today against the poster's 1; at 1.6.0 about 1.05×,
    # so the old release closes log(2/1.05)/log(2) ≈ 93 % of the distance.
    line = next(x for x in section.splitlines() if x.startswith("- mxnet alexnet"))
    share = int(re.search(r"closes (-?\d+) %", line).group(1))
    assert 85 <= share <= 100 and "(toward the poster)" in line, line
    # TensorFlow on ResNet50: 2× today against the poster's 1, the same at 2.16.2: not shown.
    line = next(x for x in section.splitlines() if x.startswith("- tensorflow resnet50"))
    assert "(not shown at this n)" in line, line
    # Where today's × the fastest holds the poster's, no line: TensorFlow on AlexNet, MXNet on ResNet50.
    assert "- tensorflow alexnet" not in section and "- mxnet resnet50" not in section
    assert "1 toward the poster" in section and "1 not shown at this n" in section
    orders = _between(out, "The ranking per era", "How much the releases explain")
    assert "pytorch → mxnet → tensorflow" in orders or "{mxnet, pytorch} → tensorflow" in orders


def test_what_the_releases_cannot_reach_is_read_from_the_adapters_and_the_sweep(tmp_path):
    out = _report(tmp_path)
    reach = _between(out, "What the releases cannot reach", "Claims")
    oldest, why = releases.served_range("tensorflow") or ("", "")
    assert (
        f"tensorflow: the sweep runs 2.16.2 and 2.21.0; bench's adapter serves {oldest} and later: {why[:40]}"
        in reach
    )
    assert "pytorch: one release in this sweep (2.13.0)" in reach
    assert "singa: not in this sweep" in reach
    assert "The poster's releases were those of 2019." in out


def test_the_releases_cells_never_reach_the_tables_or_the_claims(tmp_path):
    out = _report(tmp_path)
    # Both sweeps hold pytorch alexnet at batch 8: the claim reads the ranking sweep's alone.
    assert "several configurations" not in out and "two of the study's sweeps" not in out
    assert re.search(r"pt-fastest \(s\): holds", out), out


def test_the_closing_section_says_how_much_each_difference_the_releases_explain(tmp_path):
    out = _report(tmp_path)
    closing = out[out.index("What the re-run says today") :]
    assert "mxnet alexnet: × the fastest" in closing and "(The releases, above)" in closing
    assert "together they close" in closing


def test_too_few_runs_say_no_change_can_pass(tmp_path):
    out = _report(tmp_path, runs=3)
    assert "no change can pass the test" in out and "mxnet at n=3/3 over 2 comparisons" in out
    assert "| slower |" not in out and "slower" not in _between(out, "Each framework", "The ranking")
    assert "over 3 runs its 95 % interval holds the truth less often" in out


def test_without_its_sweep_the_section_says_so_and_still_what_it_cannot_reach(tmp_path):
    study = loader.load_study(_study(tmp_path))
    url = write_db(
        tmp_path / "t.db", [({"framework": "pytorch", "model": "alexnet", "batch_size": 8}, FAST, {})]
    )
    db = Database(url, create=False)
    try:
        out = study_report.report(study, measured.read(db, study, "cpu"), "text")
    finally:
        db.close()
    section = _between(out, "The releases\n", "Claims")
    assert "Not run yet: bench study run t runs it (scale cpu)." in section
    assert "pytorch: one release in this sweep (2.13.0)" in section


def test_the_html_page_escapes_the_study_files_words(tmp_path):
    hostile = RELEASES.replace("The poster's releases were those of 2019.", "'<script>alert(1)</script>'")
    page = _report(tmp_path, "html", hostile)
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<h2" in page and "The releases</h2>" in page


@pytest.mark.parametrize(
    ("tail", "says"),
    [
        (RELEASES.replace("rel.yaml", "nope.yaml"), r"matrix: 'nope\.yaml': not one of the study's matrices"),
        (RELEASES.replace("rel.yaml", "grid.yaml"), r"matrix: grid\.yaml runs each framework at one release"),
        (
            RELEASES.replace("published: poster", "published: gone"),
            r"published: 'gone': no such published table",
        ),
        (
            RELEASES.replace("columns: model", "columns: batch_size"),
            r"columns: the table poster compares per model",
        ),
        (RELEASES.replace("columns: model", "columns: modell"), r"columns: 'modell' is not a setting"),
        (RELEASES + "  extra: 1\n", r"extra"),
        ("releases:\n  published: poster\n", r"releases: releases needs matrix"),
        ("releases: [rel.yaml]\n", r"releases: expected a mapping"),
    ],
)
def test_a_bad_releases_key_is_refused_in_one_line_with_file_line_and_key(tmp_path, tail, says):
    with pytest.raises(ConfigError) as caught:
        loader.load_study(_study(tmp_path, tail))
    message = str(caught.value)
    assert "\n" not in message and re.search(r"study\.yaml:\d+: " + says, message), message


def test_a_releases_matrix_that_runs_none_of_the_tables_configurations_is_refused(tmp_path):
    with pytest.raises(
        ConfigError, match=r"study\.yaml:\d+: matrix: rel\.yaml runs none of the configurations"
    ):
        loader.load_study(_study(tmp_path, rel=REL.replace("batch_size: 8", "batch_size: 32")))


def test_the_umons_study_answers_its_cpu_table_with_its_releases_matrix():
    study = loader.load_named(REPO / "studies", "umons")
    spec = study.releases
    assert spec is not None and spec.table.name == "poster-cpu-791" and spec.matrix.scale == "cpu"
    ran = releases.planned(spec.matrix.matrix.configs)
    assert all(len(ran[f]) == 2 for f in ("pytorch", "mxnet", "tensorflow", "paddle"))
    # Each framework's oldest release run is one its adapter serves (else its runs are unsupported).
    for framework, versions in ran.items():
        assert releases.served.unsupported(framework, versions[0]) is None
    assert published_table.read_table(spec.table).cells
