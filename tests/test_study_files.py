"""Study files and published tables are outside input: every problem ends in one line naming the
file, the line and the key (orchestrator/studies/loader.py, published.py), and `bench study`
turns it into `error: ...` and exit 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.studies import loader
from tests.studies_db import write_study

TABLE = """\
published:
  - name: poster
    file: published/p.csv
    unit: {unit}
    row: a framework's time on a model
    value: value
    columns: model
    where: {{device: cpu}}
    measured: {{device: cpu, batch_size: 8}}
{policies}"""
CSV = "framework,model,device,value,note\npytorch,alexnet,cpu,139,\ntensorflow,alexnet,cpu,528,\n"


def _study(tmp_path: Path, tail: str = "", csv: str | bytes | None = None) -> Path:
    folder = write_study(tmp_path / "studies", tail)
    if csv is not None:
        (folder / "published").mkdir(exist_ok=True)
        path = folder / "published" / "p.csv"
        path.write_bytes(csv if isinstance(csv, bytes) else csv.encode())
    return folder


def _table(unit: str = "s", policies: str = "") -> str:
    return TABLE.format(unit=unit, policies=policies)


def _refused(folder: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        loader.load_study(folder)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_good_study_loads_with_its_table_and_claims(tmp_path):
    tail = _table() + "claims:\n  - {id: c, kind: order, text: t, source: s, order: [pytorch, tensorflow]}\n"
    study = loader.load_study(_study(tmp_path, tail, CSV))
    assert study.name == "t" and study.scales == ("cpu",)
    assert [t.name for t in study.tables] == ["poster"] and study.claims[0].subjects == (
        "pytorch",
        "tensorflow",
    )
    assert study.runs_planned() == 18 and study.runs_planned("cpu") == 18 and study.runs_planned("gpu") == 0


C = "{id: c, text: t, source: s, "  # what every claim below has
TWO = "a: pytorch, b: tensorflow"


@pytest.mark.parametrize(
    "claim,says",
    [
        (
            C + "kind: order, order: [pytorch, tensorflow], columns: modell}",
            "study.yaml:8: columns: 'modell' is not a setting (did you mean model?)",
        ),
        (
            C + "kind: order, order: [pytorch, tensorflow], where: {model: vgg16}}",
            "study.yaml:8: model: model 'vgg16' is not run by the study's matrices (they run alexnet, resnet",
        ),
        (
            C + "kind: fastest, who: caffe, in: [every]}",
            "study.yaml:8: who: framework: unknown framework 'caffe'",
        ),
        (
            C + "kind: fastest, who: jax, in: [every]}",
            "study.yaml:8: who: framework 'jax' is not run by the study",
        ),
        (
            C + "kind: fastest, who: pytorch, in: [always]}",
            "study.yaml:8: in: 'always': expected one of every",
        ),
        (
            C + f"kind: resource, {TWO}, relation: less, metric: seconds_per_image}}",
            "study.yaml:8: metric: 'seconds_per_image': expected one of cpu_percent_mean",
        ),
        (C + f"kind: ratio, {TWO}}}", "a ratio claim gives one of above or below"),
        (C + f"kind: ratio, {TWO}, above: -1}}", "expected a positive ratio"),
        (
            C + "kind: not_checkable, reason: r, who: pytorch}",
            "study.yaml:8: who: a not_checkable claim does not take who",
        ),
        (C + "kind: guess}", "kind: 'guess': expected one of fastest"),
        (C + "kind: order}", "study.yaml:8: order: a order claim needs order"),
        (C + "kind: rises_with, axis: framework}", "the axis and items are both framework"),
        (
            C + "kind: order, order: [pytorch, tensorflow], columns: framework}",
            "columns and items are both framework",
        ),
        (
            C + "kind: not_checkable, reason: ' '}",
            "study.yaml:8: reason: say why the claim cannot be checked here",
        ),
    ],
)
def test_a_claim_that_names_what_does_not_exist_is_refused_in_one_line(tmp_path, claim, says):
    message = _refused(_study(tmp_path, f"claims:\n  - {claim}\n"))
    assert says in message and "t/study.yaml:" in message


@pytest.mark.parametrize(
    "csv,says",
    [
        ("framework,model,value\npytorch,alexnet,1\n", "p.csv:1: device: no such column"),
        (CSV + "mxnet,alexnet,cpu,\x1b[31m4,\n", "p.csv:4: a control character ('\\x1b')"),
        (CSV + "mxnet,alexnet,cpu,,\n", "p.csv:4: value: an empty cell (the table may say missing: carry)"),
        (CSV + "caffe,alexnet,cpu,12,\n", "p.csv:4: framework: bench has no caffe"),
        (CSV + "mxnet,alexnet,cpu,1;5,\n", "p.csv:4: value: '1;5' is not a number"),
        (CSV + "mxnet,alexnet,cpu,-3,\n", "p.csv:4: value: '-3' is not a positive figure"),
        (CSV + "pytorch,alexnet,cpu,3,\n", "p.csv:4: pytorch alexnet given twice"),
        (CSV + "mxnet,alexnet,cpu\n", "p.csv:4: 3 fields where the header has 5"),
        (b"framework,model,device,value\n\xff\n", "p.csv:2: the file is not UTF-8 text"),
        ("framework,model,device,value\npytorch,alexnet,gpu,1\n", "no row matches the table poster's where"),
        (
            "framework,model,device,value,value\npytorch,alexnet,cpu,1,2\n",
            "p.csv:1: value: a column named twice",
        ),
        (CSV + 'mxnet,alexnet,cpu,"1\n2",\n', "p.csv:5: value: '1\\n2' is not a number"),
    ],
)
def test_a_bad_published_table_is_refused_in_one_line(tmp_path, csv, says):
    assert says in _refused(_study(tmp_path, _table(), csv))


def test_a_bad_unit_is_refused_with_its_line(tmp_path):
    message = _refused(_study(tmp_path, _table(unit="furlongs"), CSV))
    assert "study.yaml:10: unit: 'furlongs': expected one of s, ms" in message


def test_a_table_may_carry_an_empty_cell_with_its_note_and_a_framework_bench_lacks(tmp_path):
    from orchestrator.studies import published

    csv = CSV + "singa,alexnet,cpu,,crashed in the study\ncaffe,alexnet,cpu,12,\n"
    study = loader.load_study(
        _study(tmp_path, _table(policies="    missing: carry\n    unknown: carry\n"), csv)
    )
    cells = published.read_table(study.tables[0]).cells["alexnet"]
    assert cells["singa"].value is None and cells["singa"].note == "crashed in the study"
    assert cells["caffe"].value == 12 and cells["caffe"].lacking == "bench has no framework caffe"
    without_note = CSV + "singa,alexnet,cpu,,\n"
    folder = _study(tmp_path / "again", _table(policies="    missing: carry\n"), without_note)
    assert "an empty cell needs a note saying why" in _refused(folder)


@pytest.mark.parametrize(
    "tail,says",
    [
        (
            "published:\n  - {name: p, file: ../../etc/passwd, unit: s, row: r, value: v, columns: model}\n",
            "file: '../../etc/passwd': a path inside the study's folder",
        ),
        (
            "published:\n  - {name: p, file: /etc/passwd, unit: s, row: r, value: v, columns: model}\n",
            "a path inside the study's folder",
        ),
        ("colour: red\n", "study.yaml:7: colour: unknown key"),
        ("name: again\n", "study.yaml:7: name: duplicate key"),
        (
            "claims:\n  - "
            + C
            + "kind: not_checkable, reason: r}\n  - "
            + C
            + "kind: not_checkable, reason: r}\n",
            "study.yaml:9: claims: c: given twice",
        ),
        ("claims: {a: 1}\n", "study.yaml:7: claims: expected a list"),
        ("claims:\n  - [1, 2]\n", "claims: expected a mapping"),
    ],
)
def test_a_hostile_study_file_ends_in_one_line(tmp_path, tail, says):
    assert says in _refused(_study(tmp_path, tail))


def test_a_study_without_a_matrix_or_a_title_is_refused(tmp_path):
    folder = _study(tmp_path)
    (folder / "study.yaml").write_text("name: t\ntitle: x\ncitation: y\nmatrices: []\n")
    assert "study.yaml:4: matrices: a study runs at least one matrix" in _refused(folder)
    (folder / "study.yaml").write_text("name: t\ncitation: y\nmatrices: []\n")
    assert "study.yaml:1: title: missing" in _refused(folder)


def test_an_empty_or_binary_study_file_is_one_line(tmp_path):
    folder = _study(tmp_path)
    (folder / "study.yaml").write_bytes(b"")
    assert "study.yaml:1: matrix: the file is empty" in _refused(folder)
    (folder / "study.yaml").write_bytes(b"name: \xff\n")
    assert "is not UTF-8 text" in _refused(folder)


def test_the_cli_says_error_and_exits_1(tmp_path, cli):
    _study(tmp_path, "claims:\n  - {id: c, kind: fastest, text: t, source: s, who: caffe, in: [every]}\n")
    result = cli("study", "list", "--studies", str(tmp_path / "studies"))
    assert result.exit_code == 1
    assert result.output.startswith("error: ") and result.output.count("\n") == 1
    assert "who: framework: unknown framework 'caffe'" in result.output


def test_a_study_of_many_claims_loads_and_one_too_many_is_refused(tmp_path):
    claim = "  - {{id: c{i}, kind: order, text: t, source: s, order: [pytorch, tensorflow, mxnet]}}\n"
    many = "claims:\n" + "".join(claim.format(i=i) for i in range(loader.MAX_ITEMS))
    assert len(loader.load_study(_study(tmp_path, many)).claims) == loader.MAX_ITEMS
    more = many + claim.format(i=loader.MAX_ITEMS)
    assert f"claims: {loader.MAX_ITEMS + 1} entries (at most {loader.MAX_ITEMS})" in _refused(
        _study(tmp_path / "more", more)
    )
