"""A study's scaling ratios (studies/ratios.py, loader_ratios.py): the published ratio beside bench's
measured one or beside the linear reference, on a hand-built database with known answers; and a
ratios section that is wrong, refused in one line naming the file, the line and the key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.storage.db import Database
from orchestrator.studies import loader, measured, ratios
from tests.studies_db import FAST, NOISY_A, NOISY_B, write_db, write_study

TABLES = """\
published:
  - name: times
    file: published/times.csv
    unit: s
    row: a framework's training time on a data set
    value: value
    columns: model
    where: {photos: 100}
    measured: {batch_size: 8}
  - name: tp
    file: published/tp.csv
    unit: images/s
    row: throughput at one batch
    value: images_per_second
    items: batch_size
    columns: framework
    where: {model: alexnet}
    measured: {model: alexnet}
"""
RATIOS = """\
ratios:
  - name: photos
    table: times
    axis: photos
    from: 100
    to: 800
    reference: linear
    why: bench's time per image cannot change with the data set's size.
  - name: same
    table: tp
    axis: batch_size
    from: 1
    to: 32
    measured: batch_size
  - name: wide
    table: tp
    axis: batch_size
    from: 1
    to: 64
    measured: batch_size
"""
TIMES = (
    "framework,model,photos,value\npytorch,alexnet,100,10\npytorch,alexnet,800,160\n"
    "tensorflow,alexnet,100,10\ntensorflow,alexnet,800,80\nmxnet,alexnet,100,20\nmxnet,alexnet,800,100\n"
)
TP = (
    "framework,model,batch_size,images_per_second\npytorch,alexnet,1,100\npytorch,alexnet,32,200\n"
    "pytorch,alexnet,64,300\ntensorflow,alexnet,1,100\ntensorflow,alexnet,32,400\ntensorflow,alexnet,64,500\n"
)


def _folder(tmp_path: Path, ratios_text: str = RATIOS) -> Path:
    folder = write_study(tmp_path / "studies", TABLES + ratios_text)
    (folder / "published").mkdir(exist_ok=True)
    (folder / "published" / "times.csv").write_text(TIMES)
    (folder / "published" / "tp.csv").write_text(TP)
    return folder


def _db(tmp_path: Path) -> str:
    """PyTorch's throughput doubles from batch 1 to 32, TensorFlow's halves, MXNet's is noise."""
    half = [x / 2 for x in FAST]
    double = [x * 2 for x in FAST]
    cells = [
        ({"framework": "pytorch", "model": "alexnet", "batch_size": 1}, FAST, {}),
        ({"framework": "pytorch", "model": "alexnet", "batch_size": 32}, half, {}),
        ({"framework": "tensorflow", "model": "alexnet", "batch_size": 1}, FAST, {}),
        ({"framework": "tensorflow", "model": "alexnet", "batch_size": 32}, double, {}),
        ({"framework": "mxnet", "model": "alexnet", "batch_size": 1}, NOISY_A, {}),
        ({"framework": "mxnet", "model": "alexnet", "batch_size": 32}, NOISY_B, {}),
    ]
    return write_db(tmp_path / "t.db", cells)


def _rows(tmp_path: Path) -> dict[str, dict[str, dict[str, str]]]:
    study = loader.load_study(_folder(tmp_path))
    db = Database(_db(tmp_path), create=False)
    try:
        found = measured.read(db, study, "cpu")
    finally:
        db.close()
    return {t.ratio.name: {r["row"]: r for r in t.rows} for t in ratios.tables(study.ratios, found)}


def test_a_published_ratio_is_read_against_linear_scaling(tmp_path):
    rows = _rows(tmp_path)["photos"]
    assert set(rows) == {"alexnet pytorch", "alexnet tensorflow", "alexnet mxnet"}
    assert rows["alexnet pytorch"]["study"] == "10 → 160 s: 16×"
    assert rows["alexnet pytorch"]["bench"] == "linear: 8×"
    assert rows["alexnet pytorch"]["says"] == "the study's time grew 16× for 8× the photos: more than linear"
    assert rows["alexnet tensorflow"]["says"].endswith("grew 8× for 8× the photos: about linear (within 5 %)")
    assert rows["alexnet mxnet"]["says"].endswith("grew 5× for 8× the photos: less than linear")


def test_a_measured_ratio_over_the_same_span_is_compared_in_size(tmp_path):
    rows = _rows(tmp_path)["same"]
    pytorch, tensorflow = rows["pytorch"], rows["tensorflow"]
    assert pytorch["study"] == "100 → 200 images/s: 2×"
    assert re.fullmatch(r"1 → 32: 2× \[1\.9\d*–2\.0\d*\], n=5/5", pytorch["bench"]), pytorch["bench"]
    assert pytorch["says"] == (
        "the study's throughput rises, bench's throughput rises: bench's interval holds the study's ratio"
    )
    assert tensorflow["bench"].startswith("1 → 32: 0.5× [")
    assert tensorflow["says"] == (
        "the study's throughput rises, bench's throughput falls: opposite directions, "
        "bench's ratio below the study's"
    )
    # A framework the study did not publish is still a row, its bench side inside the noise.
    assert rows["mxnet"]["study"] == "— (not in the published table)"
    assert (
        rows["mxnet"]["says"]
        == "no published ratio; bench's change lies inside its noise (not shown at n=5/5)"
    )


def test_a_measured_ratio_over_another_span_compares_only_the_direction(tmp_path):
    rows = _rows(tmp_path)["wide"]
    assert rows["pytorch"]["study"] == "100 → 300 images/s: 3×"
    assert rows["pytorch"]["says"].endswith(
        "the same direction (the spans differ, 1 → 64 against 1 → 32: only the direction is compared)"
    )
    assert "opposite directions (the spans differ" in rows["tensorflow"]["says"]


def test_the_ratios_section_is_in_the_text_and_markdown_reports(cli, tmp_path):
    _folder(tmp_path)
    db = _db(tmp_path)
    args = ("study", "report", "t", "--studies", str(tmp_path / "studies"), "--db", db)
    md = cli(*args, "--format", "markdown")
    assert md.exit_code == 0, md.output
    assert "## Scaling ratios" in md.output and "### photos: photos 100 → 800" in md.output
    assert "| model × framework | study | reference | says |" in md.output
    assert "| framework | study | bench | says |" in md.output
    text = cli(*args)
    assert text.exit_code == 0 and "Scaling ratios\n--------------" in text.output


def test_without_runs_the_bench_side_says_why(tmp_path):
    study = loader.load_study(_folder(tmp_path))
    db = Database(f"sqlite:///{tmp_path / 'empty.db'}", create=True)  # no sweep at all
    try:
        found = measured.read(db, study, "cpu")
    finally:
        db.close()
    [same] = [t for t in ratios.tables(study.ratios, found) if t.ratio.name == "same"]
    assert {r["bench"] for r in same.rows} == {"not run here: no runs in the database yet"}


GPU_MATRIX = """\
name: grid
settings: {threads: 2, model: alexnet}
axes:
  framework: [pytorch]
  device: [cpu, cuda]
  batch_size: [1, 8, 32]
"""


def test_a_ratio_whose_runs_need_a_gpu_says_so(tmp_path):
    tail = TABLES.replace("measured: {model: alexnet}", "measured: {model: alexnet, device: cuda}") + RATIOS
    folder = write_study(tmp_path / "studies", tail, matrix=GPU_MATRIX)
    (folder / "published").mkdir()
    (folder / "published" / "times.csv").write_text(TIMES)
    (folder / "published" / "tp.csv").write_text(TP)
    study = loader.load_study(folder)
    cells = [({"framework": "pytorch", "model": "alexnet", "batch_size": 1}, FAST, {})]
    db = Database(write_db(tmp_path / "cpu.db", cells), create=False)
    try:
        found = measured.read(db, study, "cpu")
    finally:
        db.close()
    [same] = [t for t in ratios.tables(study.ratios, found) if t.ratio.name == "same"]
    assert same.rows[0]["bench"] == "not run here: needs a GPU (device cuda); no sweep read here ran on one"


def test_the_shipped_studies_ratios_load():
    root = Path(__file__).resolve().parent.parent / "studies"
    umons, msu = loader.load_named(root, "umons"), loader.load_named(root, "msu")
    assert [(r.name, r.reference) for r in umons.ratios] == [
        ("photos-cpu", "linear"),
        ("photos-gpu", "linear"),
    ]
    assert [(r.name, r.measured, r.low, r.high) for r in msu.ratios] == [
        ("batch", "batch_size", "250", "5000")
    ]


def _refused(tmp_path: Path, ratios_text: str) -> str:
    folder = _folder(tmp_path, ratios_text)
    with pytest.raises(ConfigError) as caught:
        loader.load_study(folder)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{folder / 'study.yaml'}:")
    return message.removeprefix(f"{folder / 'study.yaml'}:")


# The study.yaml's ratios section starts on this line (STUDY_HEAD, then TABLES).
AT = 6 + TABLES.count("\n") + 1
ONE = "ratios:\n  - {{name: r, table: {table}, axis: {axis}, from: {low}, to: {high}, {side}}}\n"


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"table": "nope"}, "table: 'nope': no such published table (times, tp)"),
        (
            {"side": "reference: linear, measured: batch_size"},
            "ratios: a ratio gives one of measured or reference",
        ),
        ({"low": 200}, "from: photos 200: no row of the table times holds it"),
        ({"high": 100}, "to: 100: the same level as from"),
        ({"axis": "fotos"}, "axis: "),
        ({"side": "reference: linear"}, "reference: say why bench's figure cannot change with the axis"),
        ({"side": "reference: quadratic, why: w"}, "reference: 'quadratic': expected one of linear"),
        (
            {"side": "measured: batchsize"},
            "measured: 'batchsize' is not a setting (did you mean batch_size?)",
        ),
        ({"side": "measured: model, why: w"}, "measured: model: the table's rows are per model"),
        ({"side": "measured: batch_size, where: {batch_size: 3}"}, "batch_size: batch_size 3 is not run"),
        ({"side": "reference: linear, why: w, colour: red"}, "colour: "),
        (
            {"side": "measured: device, where: {device: cpu}"},
            "measured: device is pinned (the table's measured or",
        ),
    ],
)
def test_a_bad_ratio_is_one_line_with_its_line_and_key(tmp_path, fields, says):
    values = {
        "table": "times",
        "axis": "photos",
        "low": 100,
        "high": 800,
        "side": "reference: linear, why: w",
    }
    values.update(fields)
    message = _refused(tmp_path, ONE.format(**values))
    assert message.startswith(f"{AT + 1}: "), message
    assert says in message, message


def test_a_measured_ratio_must_vary_the_axis_the_table_is_per(tmp_path):
    text = ONE.format(table="tp", axis="batch_size", low=1, high=32, side="measured: model")
    assert "measured: model: the axis is the table's batch_size: vary it" in _refused(tmp_path, text)
