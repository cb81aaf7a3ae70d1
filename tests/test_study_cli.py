"""`bench study list`, `run` and `report`: the tiny study (the fault worker) through all three, and
the shipped umons study reported from a hand-built database of its CPU ranking."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from orchestrator.storage.db import Database
from tests.studies_db import FAST, SLOW, write_db, write_study

REPO = Path(__file__).resolve().parent.parent
TINY = REPO / "tests" / "data" / "studies"


def test_list_names_each_study_with_its_matrices_runs_and_claims(cli):
    result = cli("study", "list", "--studies", str(TINY))
    assert result.exit_code == 0, result.output
    [line] = [x for x in result.output.splitlines() if x.startswith("tiny ")]
    assert "A tiny study of the fault worker" in line and "tiny.yaml (cpu)" in line
    assert line.split()[-3:] == ["4", "5", "none"]  # runs planned, claims, committed results


def test_the_shipped_studies_are_listed_and_load(cli):
    result = cli("study", "list")
    assert result.exit_code == 0, result.output
    assert (
        "cpu-ranking.yaml (cpu), memory.yaml (cpu), cpu-releases.yaml (cpu), gpu-ranking.yaml (gpu)"
        in result.output
    )
    msu = "throughput.yaml (cpu), optimizers.yaml (cpu), accuracy-digits.yaml (cpu), "
    msu += "throughput-full.yaml (full)"
    assert msu in result.output
    assert "cpu.yaml (cpu), full.yaml (full), gpu.yaml (gpu)" in result.output  # ufsm
    assert (
        "cifar-cnn.yaml (cpu), features.yaml (cpu), imdb-gru.yaml (cpu), gpu-cifar-cnn.yaml" in result.output
    )


def test_a_dry_run_lists_each_matrix_and_runs_nothing(cli, workdir):
    result = cli("study", "run", "tiny", "--studies", str(TINY), "--dry-run")
    assert result.exit_code == 0, result.output
    assert "study tiny/cpu: tiny: 2 configurations, 4 runs" in result.output
    assert not (workdir / "bench.db").exists()


def test_an_unknown_study_or_scale_is_one_line(cli, workdir):
    result = cli("study", "report", "tiyn", "--studies", str(TINY))
    assert (
        result.exit_code == 1
        and "error: no study tiyn in" in result.output
        and "did you mean tiny?" in result.output
    )
    result = cli("study", "run", "tiny", "--studies", str(TINY), "--scale", "gpu", "--dry-run")
    assert result.exit_code == 1 and "error: --scale gpu: study tiny has the scales cpu" in result.output


TABLE = """\
published:
  - name: times
    file: published/p.csv
    unit: s
    row: a framework's time on a model
    value: value
    columns: model
    measured: {batch_size: 8}
    missing: carry
    unknown: carry
claims:
  - {id: fast, kind: fastest, text: PyTorch is fastest, source: s, who: pytorch, in: [every], columns: model,
     where: {batch_size: 8}}
"""
CSV = (
    "framework,model,value,note\npytorch,alexnet,100,\ntensorflow,alexnet,250,\nmxnet,alexnet,,lost\n"
    "caffe,alexnet,80,\npytorch,resnet50,300,\ntensorflow,resnet50,200,\n"
)


def test_the_report_sets_published_beside_measured_and_judges_the_claims(cli, tmp_path):
    folder = write_study(tmp_path / "studies", TABLE)
    (folder / "published").mkdir()
    (folder / "published" / "p.csv").write_text(CSV)
    cells = [
        ({"framework": f, "model": m, "batch_size": 8}, figures, {})
        for m in ("alexnet", "resnet50")
        for f, figures in (("pytorch", FAST), ("tensorflow", SLOW))
    ]
    cells.append(({"framework": "mxnet", "model": "alexnet", "batch_size": 8}, FAST[:2], {"outcome": "oom"}))
    db = write_db(tmp_path / "t.db", cells)
    result = cli(
        "study", "report", "t", "--studies", str(tmp_path / "studies"), "--db", db, "--format", "markdown"
    )
    assert result.exit_code == 0, result.output
    out = result.output
    assert "Measured at scale cpu: study t/cpu: grid (sweep 1," in out
    # Each cell × the fastest, published and measured with its interval; the rank; the orders and τ-b.
    assert "| pytorch | 100 | 1.25 | 1,000 \\[980–1,020\\] | 5 | 1 | 1 |" in out
    assert "| tensorflow | 250 | 3.12 | 2,000 \\[1,980–2,020\\] | 5 | 2 \\[1.96–2.04\\] | 2 |" in out
    assert "| alexnet | pytorch → tensorflow | caffe, pytorch, tensorflow | 1.00 over 2 |" in out
    assert "| resnet50 | pytorch → tensorflow | tensorflow, pytorch | -1.00 over 2 |" in out
    # What bench did not run is a row that says why, never a row left out.
    assert "| caffe | 80 | 1.00 | not run here: bench has no framework caffe | 0 |" in out
    assert "| mxnet | — (lost) | — | not run here: no ok run (oom ×2) | 0 |" in out
    assert "| fast | fastest | holds | PyTorch is fastest |" in out
    assert "edited since" not in out
    conn = sqlite3.connect(tmp_path / "t.db")
    conn.execute("UPDATE sweeps SET matrix_hash = 'an older file'")
    conn.commit()
    conn.close()
    again = cli("study", "report", "t", "--studies", str(tmp_path / "studies"), "--db", db).output
    assert "note: edited since its sweep ran: grid.yaml (sweep 1)" in again


def test_the_umons_report_reads_its_cpu_ranking_and_says_what_was_not_run(cli, tmp_path):
    scale = {"pytorch": 1.0, "tensorflow": 2.0, "mxnet": 1.5, "paddle": 3.0}
    cells = [
        ({"framework": f, "model": m, "batch_size": 8}, [x * by for x in FAST], {"cpu_percent_mean": 150.0})
        for f, by in scale.items()
        for m in ("alexnet", "mobilenet_v2", "resnet50", "vgg16")
    ]
    cells.append(({"framework": "singa", "model": "vgg16", "batch_size": 8}, FAST[:4], {"outcome": "crash"}))
    db = write_db(tmp_path / "u.db", cells, sweep="study umons/cpu: umons-cpu-ranking")
    result = cli("study", "report", "umons", "--db", db)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "not run yet: memory.yaml (scale cpu)" in out
    assert "singa       273" in out and "not run here: no ok run (crash ×4)" in out
    assert "not run here: no runs of it in the study's sweeps" in out  # singa's other models
    assert "pytorch → mxnet → tensorflow → paddle" in out
    verdicts = {
        line.split()[0]: line for line in out.splitlines() if line.startswith(("cpu-", "tf-", "pytorch-"))
    }
    assert "holds" in verdicts["cpu-fastest"] and "holds" in verdicts["cpu-fastest-each-model"]
    assert "not shown at this n" in verdicts["pytorch-full-cpu"]  # equal CPU use: inside the noise
    assert "not checkable here" in verdicts["tf-less-ram-sgd"]  # memory.yaml has not run


def test_report_without_a_database_is_one_line(cli, workdir):
    result = cli("study", "report", "tiny", "--studies", str(TINY), "--db", str(workdir / "none.db"))
    assert result.exit_code == 1 and result.output.startswith("error: ")


def test_the_tiny_study_runs_resumes_and_reports(cli, workdir):
    """The fault worker's real runs, through the sweep path bench run takes."""
    result = cli("study", "run", "tiny", "--studies", str(TINY))
    assert result.exit_code == 0, result.output
    assert "4 ok" in result.output
    conn = sqlite3.connect(workdir / "bench.db")
    try:
        sweeps = conn.execute("SELECT name, matrix_path FROM sweeps").fetchall()
        runs = conn.execute("SELECT count(*) FROM runs WHERE outcome = 'ok'").fetchone()[0]
    finally:
        conn.close()
    assert [s[0] for s in sweeps] == ["study tiny/cpu: tiny"] and sweeps[0][1].endswith("tiny.yaml")
    assert runs == 4
    again = cli("study", "run", "tiny", "--studies", str(TINY), "--resume")
    assert again.exit_code == 0 and "nothing run; 4 already finished" in again.output
    report = cli("study", "report", "tiny", "--studies", str(TINY))
    assert report.exit_code == 0, report.output
    out = report.output
    assert "Measured at scale cpu: study tiny/cpu: tiny (sweep 1," in out and "edited since" not in out
    assert "not run here: bench has no framework caffe" in out
    assert "not run here: the study's matrices do not run it" in out  # mxnet
    rows = [re.split(r"\s{2,}", line) for line in out.splitlines() if line.startswith("fault ")]
    assert [r[:3] for r in rows] == [["fault", "100", "1.00"], ["fault", "300", "1.00"]]  # batch 8, 32
    assert all(r[4] == "2" and r[6] == "1" for r in rows)  # n, bench's rank: alone in its column
    table = [
        re.split(r"\s{2,}", x) for x in out.splitlines() if "  rises_with  " in x or "  not_checkable  " in x
    ]
    verdicts = {row[0]: row[2] for row in table}
    assert verdicts["caffe"] == "not checkable here"
    assert verdicts["rises"] in ("holds", "does not hold", "mixed", "not shown at this n")


def test_resume_with_retry_disturbed_runs_a_disturbed_run_again_and_only_it(cli, workdir):
    """bench study run takes bench run's disturbance options: a run of the study's sweep flagged
    disturbed (flagged here by hand, the one thing this test stands in for) is run again by
    --resume --retry-disturbed, and the finished ones are not."""
    assert cli("study", "run", "tiny", "--studies", str(TINY)).exit_code == 0
    conn = sqlite3.connect(workdir / "bench.db")
    try:
        [(flagged,)] = conn.execute("SELECT id FROM runs ORDER BY id LIMIT 1").fetchall()
        conn.execute("UPDATE runs SET disturbed = 1 WHERE id = ?", (flagged,))
        conn.commit()
        again = cli("study", "run", "tiny", "--studies", str(TINY), "--resume", "--retry-disturbed", "1")
        assert again.exit_code == 0, again.output
        runs = conn.execute("SELECT config_hash, run_index, disturbed FROM runs ORDER BY id").fetchall()
    finally:
        conn.close()
    assert len(runs) == 5  # the four, and the disturbed one's configuration and run index again
    assert runs[-1][:2] == runs[0][:2]
    bad = cli("study", "run", "tiny", "--studies", str(TINY), "--retry-disturbed", "-1")
    assert bad.exit_code == 1 and "--retry-disturbed '-1': expected a count" in bad.output


def test_a_studys_own_words_reach_the_report_escaped(cli, tmp_path):
    folder = write_study(tmp_path / "studies")
    text = (
        (folder / "study.yaml")
        .read_text()
        .replace("citation: the tests", 'citation: "![x](http://e/i.png) <b>\\e[31m"')
    )
    (folder / "study.yaml").write_text(text)
    db = write_db(tmp_path / "t.db", [])
    md = cli(
        "study", "report", "t", "--studies", str(tmp_path / "studies"), "--db", db, "--format", "markdown"
    )
    assert md.exit_code == 0, md.output
    assert "!\\[x\\](http://e/i.png) &lt;b&gt;" in md.output and "\x1b" not in md.output
    plain = cli("study", "report", "t", "--studies", str(tmp_path / "studies"), "--db", db).output
    assert "\\x1b[31m" in plain and "\x1b" not in plain


def test_a_hostile_stored_figure_leaves_the_rest_of_the_report(cli, tmp_path):
    folder = write_study(tmp_path / "studies", TABLE)
    (folder / "published").mkdir()
    (folder / "published" / "p.csv").write_text(CSV)
    cells = [
        ({"framework": "pytorch", "model": "alexnet", "batch_size": 8}, FAST, {"seconds_per_image": -1.0}),
        ({"framework": "tensorflow", "model": "alexnet", "batch_size": 8}, SLOW, {}),
        ({"framework": "pytorch", "model": "resnet50", "batch_size": 8}, FAST, {}),
        ({"framework": "tensorflow", "model": "resnet50", "batch_size": 8}, SLOW, {}),
    ]
    db = write_db(tmp_path / "t.db", cells)
    result = cli("study", "report", "t", "--studies", str(tmp_path / "studies"), "--db", db)
    assert result.exit_code == 0, result.output
    assert "Not compared: cell pytorch, run 1: -1.0 is not a positive time" in result.output
    assert "resnet50  pytorch → tensorflow" in result.output  # the other column is still compared
    assert "fast   fastest  not checkable here" in result.output


# sample_interval 0: no sampler, so no run is flagged disturbed (and left out of n) by another
# test's load beside this one; the report's mechanics, not disturbance, are under test here.
REAL = """\
name: real
settings: {model: small_cnn, image_size: 32, classes: 3, dataset_size: 72, val_fraction: 0.1, batch_size: 16,
           epochs: 1, warmup_steps: 1, min_steps: 2, min_time: 0, threads: 1, runs: 2, sample_interval: 0}
axes:
  framework: [fault, pytorch]
"""
REAL_STUDY = """\
published:
  - name: times
    file: published/p.csv
    unit: ms
    row: a framework's time per image on small_cnn
    value: value
    columns: model
    unknown: carry
claims:
  - {id: fault-first, kind: fastest, text: The fault worker is fastest, source: s, who: fault, in: [every],
     columns: model}
"""


@pytest.mark.slow
@pytest.mark.framework
def test_a_tiny_study_of_the_fault_worker_and_pytorch_runs_and_reports(
    cli, tmp_path, workdir, pytorch_python
):
    """One real framework beside the fault worker, through run and report: the report ranks both,
    the framework bench lacks is a row, and the claim rests on 2 runs a side (not shown)."""
    folder = write_study(tmp_path / "studies", REAL_STUDY, matrix=REAL)
    (folder / "grid.yaml").rename(folder / "real.yaml")
    text = (folder / "study.yaml").read_text().replace("path: grid.yaml", "path: real.yaml")
    (folder / "study.yaml").write_text(text)
    (folder / "published").mkdir()
    (folder / "published" / "p.csv").write_text(
        "framework,model,value\npytorch,small_cnn,2\ncaffe,small_cnn,3\n"
    )
    result = cli("study", "run", "t", "--studies", str(tmp_path / "studies"))
    assert result.exit_code == 0, result.output
    assert "4 ok" in result.output
    out = cli("study", "report", "t", "--studies", str(tmp_path / "studies")).output
    rows = {
        r[0]: r for r in (re.split(r"\s{2,}", x) for x in out.splitlines()) if r[0] in ("fault", "pytorch")
    }
    assert rows["fault"][4] == "2" and rows["pytorch"][4] == "2"  # n: each configuration's runs
    assert rows["pytorch"][1] == "2" and rows["pytorch"][2] == "1.00"  # published, × its fastest
    assert "not run here: bench has no framework caffe" in out
    [claim] = [re.split(r"\s{2,}", x) for x in out.splitlines() if x.startswith("fault-first  ")]
    assert claim[2] == "not shown at this n"  # 2 runs a side cannot tell two cells apart


@pytest.mark.parametrize(
    "name,says",
    [
        ("ufsm", ["Published only: sgemm-kernels", "| 128x64_nn | caffe | plain | 6.90060 | 75264 |"]),
        (
            "ilkarman",
            [
                "Published beside measured: k80",
                "Published beside measured: p100",
                "| gluon | 152 | 1.05 | not run here: bench has no framework gluon (Gluon is MXNet's",
                "| julia_knet | — (not submitted at the time) | — | not run here: bench has no framework",
                "| pytorch | 169 | 1.17 | not run here: no runs in the database yet | 0 |",
            ],
        ),
    ],
)
def test_a_shipped_study_reports_on_an_empty_database(cli, workdir, name, says):
    """Every table and every claim, each unmeasured row saying why; nothing left out, no crash."""
    from orchestrator.studies import loader

    Database(f"sqlite:///{workdir / 'empty.db'}", create=True).close()
    result = cli("study", "report", name, "--db", str(workdir / "empty.db"), "--format", "markdown")
    assert result.exit_code == 0, result.output
    for text in says:
        assert text in result.output
    study = loader.load_named(REPO / "studies", name)
    for claim in study.claims:
        assert f"| {claim.id} | {claim.kind} | not checkable here |" in result.output


def test_the_study_scales_plan_what_their_notes_say(cli):
    ufsm = cli("study", "run", "ufsm", "--dry-run").output
    assert "study ufsm/cpu: ufsm-cpu: 10 configurations, 50 runs" in ufsm
    ilkarman = cli("study", "run", "ilkarman", "--dry-run").output
    assert ilkarman.count(": 3 configurations, 15 runs") == 3


def test_the_ufsm_claims_read_its_cpu_sweep(cli, tmp_path):
    """A hand-built ufsm/cpu sweep: AlexNet the same in both frameworks, GoogLeNet's time per image
    falling to batch 16 and rising at 128 in TensorFlow, still falling in PyTorch."""
    base = {"image_size": 64}
    cells = [
        (
            {**base, "framework": f, "model": "alexnet", "batch_size": b},
            [x * 1.02 if f == "pytorch" else x for x in FAST],
            {},
        )
        for f in ("tensorflow", "pytorch")
        for b in (16, 128)
    ]
    shapes = {
        "tensorflow": (SLOW, FAST, [x * 1.5 for x in FAST]),
        "pytorch": ([x * 2 for x in SLOW], SLOW, FAST),
    }
    for f, figures in shapes.items():
        cells += [
            ({**base, "framework": f, "model": "googlenet", "batch_size": b}, fig, {})
            for b, fig in zip((2, 16, 128), figures, strict=True)
        ]
    db = write_db(tmp_path / "u.db", cells, sweep="study ufsm/cpu: ufsm-cpu")
    out = cli("study", "report", "ufsm", "--db", db, "--format", "markdown").output
    assert "| cpu-alexnet-similar | similar | holds |" in out
    assert "| cpu-googlenet-rises-tensorflow | rises_beyond | holds |" in out
    assert "| cpu-googlenet-rises-pytorch | rises_beyond | does not hold |" in out


def test_the_ilkarman_spread_reads_its_cnn_sweep(cli, tmp_path):
    cells = [
        (
            {"framework": f, "model": "small_cnn", "image_size": 32, "batch_size": 64},
            [x * by for x in FAST],
            {},
        )
        for f, by in (("pytorch", 1.0), ("tensorflow", 1.3), ("mxnet", 1.6))
    ]
    db = write_db(tmp_path / "i.db", cells, sweep="study ilkarman/cpu: ilkarman-cifar-cnn")
    out = cli("study", "report", "ilkarman", "--db", db, "--format", "markdown").output
    assert "| cnn-within-1-9 | spread | holds |" in out
    assert "| pytorch-among-fastest | order | holds |" in out  # the CNN column alone has runs
    assert "not run yet: features.yaml (scale cpu), imdb-gru.yaml (scale cpu)" in out
