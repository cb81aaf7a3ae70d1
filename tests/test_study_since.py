"""The closing section of a study's report, "What the re-run says today" (orchestrator/studies/
since.py): the counts of its verdicts and τ-b between the orders come from the report's own figures,
the causes from the study file (each naming claims it states and a section of bench's docs), and a
hostile cause can neither break the page nor link anywhere else."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.storage.db import Database
from orchestrator.studies import loader, measured
from orchestrator.studies import report as study_report
from tests.studies_db import FAST, SLOW, write_db, write_study
from tests.test_fairness_notes import anchor

REPO = Path(__file__).resolve().parent.parent

CLAIMS = """\
claims:
  - {id: pt-fastest, kind: fastest, text: t, source: s, who: pytorch, in: [every], columns: model,
     where: {batch_size: 8}}
  - {id: tf-fastest, kind: fastest, text: t, source: s, who: tensorflow, in: [every], columns: model,
     where: {batch_size: 8}}
  - {id: caffe, kind: not_checkable, text: t, source: s, reason: bench has no Caffe}
"""
TABLE = """\
published:
  - name: poster
    file: published/p.csv
    unit: s
    row: a framework's time on a model
    value: value
    columns: model
    where: {device: cpu}
    measured: {device: cpu, batch_size: 8}
"""
# The study's order is TensorFlow, then PyTorch, then MXNet on AlexNet: bench's runs below give
# PyTorch, TensorFlow, MXNet (one swap of three pairs: τ-b = 1/3).
CSV = (
    "framework,model,device,value,note\n"
    "pytorch,alexnet,cpu,20,\ntensorflow,alexnet,cpu,10,\nmxnet,alexnet,cpu,30,\n"
)
TEXT = "TensorFlow's convolutions are slower here."


def _report(tmp_path: Path, since: str, fmt: str = "text") -> str:
    folder = write_study(tmp_path / "studies", TABLE + CLAIMS + since)
    (folder / "published").mkdir()
    (folder / "published" / "p.csv").write_text(CSV)
    cells = [
        ({"framework": "pytorch", "model": "alexnet", "batch_size": 8}, FAST, {}),
        ({"framework": "tensorflow", "model": "alexnet", "batch_size": 8}, SLOW, {}),
        ({"framework": "mxnet", "model": "alexnet", "batch_size": 8}, [f * 3 for f in SLOW], {}),
    ]
    study = loader.load_study(folder)
    db = Database(write_db(tmp_path / "t.db", cells), create=False)
    return study_report.report(study, measured.read(db, study, "cpu"), fmt)


SINCE = """\
since:
  - claims: [tf-fastest]
    text: TensorFlow's convolutions are slower here.
    see: docs/fairness.md#pytorch
"""


def _closing(text: str) -> str:
    return text[text.index("What the re-run says today") :]


def test_the_closing_section_counts_the_verdicts_and_gives_the_orders_agreement(tmp_path):
    closing = _closing(_report(tmp_path, SINCE))
    counts = "Of the study's 3 claims, bench judged 2 on this database: 1 does not hold, 1 holds; 1 is not"
    assert counts in closing
    order = "poster: Kendall's τ-b between the published and bench's order of framework per model"
    assert order + ": alexnet 0.33" in closing
    assert "mean 0.33" in closing and "0 of 1 columns at 0.5 or more" in closing
    # What changed comes first, with a figure it rests on; the cause names its claim and its section.
    lines = [line for line in closing.splitlines() if line.startswith("- ")]
    assert lines[1].startswith("- tf-fastest: does not hold (")
    assert lines[2].startswith("- pt-fastest: holds (")
    assert "- tf-fastest: TensorFlow's convolutions are slower here. See docs/fairness.md#pytorch." in closing


def test_a_changed_claim_without_a_cause_says_so(tmp_path):
    closing = _closing(_report(tmp_path, ""))
    assert "tf-fastest: does not hold" in closing and "No cause recorded." in closing
    assert closing.count("No cause recorded.") == 1  # not beside the claim that holds
    assert "What explains them" not in closing


def test_in_markdown_the_cause_links_into_the_docs_and_its_words_cannot(tmp_path):
    hostile = SINCE.replace(TEXT, '"[click](javascript:alert(1)) <b>x</b>"')
    page = _closing(_report(tmp_path, hostile, "markdown"))
    assert "[docs/fairness.md#pytorch](../fairness.md#pytorch)" in page
    assert "\\[click\\](javascript" in page and "[click](" not in page  # shown, never a link
    assert "<b>" not in page and "&lt;b&gt;" in page


def test_a_cause_with_a_control_character_never_reaches_the_page_raw(tmp_path):
    page = _report(tmp_path, SINCE.replace(TEXT, '"\\e[31mred"'), "markdown")
    assert "red" in _closing(page) and "\x1b" not in page


@pytest.mark.parametrize(
    "since,says",
    [
        ("since:\n  - {claims: [nope], text: t}\n", "claims: 'nope': no such claim in the study"),
        ("since:\n  - {claims: [], text: t}\n", "claims: name at least one claim"),
        ("since:\n  - {claims: [caffe]}\n", "since: each entry needs text"),
        (
            "since:\n  - {claims: [caffe], text: t, see: 'https://example.com'}\n",
            "see: 'https://example.com'",
        ),
        ("since:\n  - {claims: [caffe], text: t, see: docs/../../etc.md}\n", "expected docs/NAME.md"),
        ("since:\n  - {claims: [caffe], text: t, see: 'docs/x.md#A B'}\n", "expected docs/NAME.md"),
        ("since:\n  - {claims: [caffe], text: t, colour: red}\n", "colour: unknown key"),
        ("since: {claims: [caffe]}\n", "since: expected a list"),
    ],
)
def test_a_bad_cause_is_refused_in_one_line_with_file_line_and_key(tmp_path, since, says):
    folder = write_study(tmp_path / "studies", CLAIMS + since)
    with pytest.raises(ConfigError) as caught:
        loader.load_study(folder)
    message = str(caught.value)
    assert "\n" not in message and says in message, message
    assert re.search(r"t/study\.yaml:\d+: ", message), message


def test_every_shipped_cause_points_at_a_page_and_section_that_exist():
    seen = 0
    for folder in loader.study_folders(REPO / "studies"):
        for cause in loader.load_study(folder).since:
            if not cause.see:
                continue
            seen += 1
            page, _, section = cause.see.partition("#")
            assert (REPO / page).is_file(), (folder.name, cause.see)
            if section:
                headings = re.findall(r"^#+ (.+)$", (REPO / page).read_text(), re.M)
                assert section in {anchor(h) for h in headings}, (folder.name, cause.see)
    assert seen >= 3  # the umons study's causes, at least
