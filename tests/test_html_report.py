"""`bench report --html` and `bench inspect --plot` over real sweeps: the fault worker holding
threads and memory, crashing and killed over its budget; a sweep of nothing but failures; and (marked
framework) a tiny PyTorch sweep whose batch sizes and optimizers give the batch and accuracy plots.
The page is rendered in headless Chromium and every plot in it decoded and measured."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import textwrap
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from PIL import Image

from orchestrator.cli.main import cli as bench_cli
from orchestrator.report.html.page import crash_list, html_table
from orchestrator.report.tables.results import RESULT_COLUMNS
from tests.conftest import BACKENDS, new_database

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
WINDOW = (1400, 3000)
# Two batch sizes × two thread counts of held work (batch plot, timelines), a segfault well into
# its first epoch (a second of steps: one in the first tenth of a second can beat the sampler's
# first sample), a run killed over its memory budget, and one without a sampler (nothing to plot).
FAULTS = """
name: html-faults
settings:
  framework: fault
  fault: hold
  hold_seconds: 0.4
  hold_memory_mb: 40
  sample_interval: 0.05
  epochs: 2
axes:
  batch_size: [1, 8]
  hold_threads: [1, 3]
include:
  - {framework: fault, fault: segfault, after_steps: 1500, batch_size: 1, dataset_size: 4000}
  - {framework: fault, fault: hold, hold_memory_mb: 200, hold_seconds: 5, memory_budget: 100MiB}
  - {framework: fault, fault: ok, sample_interval: 0}
"""
CRASHES_ONLY = """
name: html-crashes
settings: {framework: fault, sample_interval: 0.05}
axes:
  fault: [segfault, abort, raise]
"""
PYTORCH = """
name: html-pytorch
settings:
  min_time: 0  # timing is not the point here: no extra epochs
  min_steps: 1
  framework: pytorch
  model: small_cnn
  image_size: 32
  dataset_size: 80
  classes: 3
  epochs: 3
  warmup_steps: 1
  threads: 1
axes:
  batch_size: [8, 32]
  optimizer: [sgd, adam]
"""
# Two sweeps of the same held work that differ only in `threads` (as `--sweep all` over a 2-thread
# sweep and a default-threads one, issue 22): the batch plot must not pool them.
THREADS_SWEEP = """
name: html-threads-{threads}
settings: {{framework: fault, fault: hold, hold_seconds: 0.2, epochs: 1, threads: {threads},
           sample_interval: 0}}
axes: {{batch_size: [1, 8]}}
"""


def run_sweep(folder: Path, text: str, db: str | Path) -> str:
    matrix = folder / f"{abs(hash(text))}.yaml"
    matrix.write_text(textwrap.dedent(text).lstrip())
    result = CliRunner().invoke(bench_cli, ["run", "--matrix", str(matrix), "--db", str(db)])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module", params=BACKENDS)
def db(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """Sweep 1: the fault sweep above; sweep 2: nothing but failures (on each backend)."""
    folder = tmp_path_factory.mktemp("html")
    path = new_database(request, folder)
    assert "1 crash, 5 ok, 1 oom" in run_sweep(folder, FAULTS, path)
    assert "2 crash, 1 error" in run_sweep(folder, CRASHES_ONLY, path)
    return path


def bench(db: str | Path, *args: str):
    return CliRunner().invoke(bench_cli, [*args, "--db", str(db)], catch_exceptions=False)


class _Images(HTMLParser):
    """Every <img data-plot> of the page, and every section's "no data" sentence."""

    def __init__(self) -> None:
        super().__init__()
        self.images: dict[str, dict[str, str]] = {}
        self.empty: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag == "img" and "data-plot" in found:
            self.images[found["data-plot"]] = found
        if "data-empty" in found:
            self.empty.append(found["data-empty"])

    def series(self, plot_id: str) -> list[dict]:
        """The lines a plot draws, as the page keeps them beside the picture."""
        return json.loads(self.images[plot_id]["data-series"])


def parse_page(index: Path) -> _Images:
    parser = _Images()
    parser.feed(index.read_text(encoding="utf-8"))
    return parser


def decoded(img: dict[str, str]) -> Image.Image:
    """The embedded PNG, checked to be one and of a size a person can read."""
    prefix = "data:image/png;base64,"
    assert img["src"].startswith(prefix) and img["alt"]
    image = Image.open(io.BytesIO(base64.b64decode(img["src"][len(prefix) :])))
    assert image.format == "PNG"
    assert image.width >= 600 and image.height >= 200, image.size
    assert len(image.convert("RGB").getcolors(maxcolors=1 << 20) or ()) > 5  # not one flat colour
    return image


def make_page(db: Path, out: Path, *args: str) -> tuple[_Images, Path]:
    result = bench(db, "report", "--html", str(out), *args)
    assert result.exit_code == 0, result.output
    index = out / "index.html"
    assert result.output.strip() == str(index) and index.is_file()
    page = parse_page(index)
    for plot_id, img in page.images.items():
        decoded(img)
        assert (out / "plots" / f"{plot_id}.png").read_bytes() == base64.b64decode(
            img["src"].split(",", 1)[1]
        )
    return page, index


def screenshot(index: Path, out: Path) -> Path | None:
    """Headless Chromium's picture of the page; None (the caller skips) when it is not installed
    and BENCH_REQUIRE_CHROMIUM is unset — CI sets it, so there the test cannot silently skip."""
    if not CHROMIUM.exists():
        if os.environ.get("BENCH_REQUIRE_CHROMIUM"):
            pytest.fail(f"{CHROMIUM} is missing and BENCH_REQUIRE_CHROMIUM is set (.ci/run installs it)")
        return None
    shot = out / "screenshot.png"
    profile = out / "chromium-profile"
    subprocess.run(
        [
            str(CHROMIUM),
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            f"--screenshot={shot}",
            f"--window-size={WINDOW[0]},{WINDOW[1]}",
            index.resolve().as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    shutil.rmtree(profile, ignore_errors=True)
    return shot


def check_screenshot(index: Path, out: Path) -> None:
    shot = screenshot(index, out)
    if shot is None:
        pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium; CI sets BENCH_REQUIRE_CHROMIUM)")
    assert shot.stat().st_size > 20_000
    image = Image.open(shot).convert("RGB")
    assert image.size == WINDOW
    # A rendered page with plots has many colours; a blank or error page has a handful.
    assert len(image.getcolors(maxcolors=1 << 20) or ()) > 200
    low, high = image.convert("L").getextrema()
    assert high - low > 200


def test_page_of_a_fault_sweep(db: Path, tmp_path: Path):
    page, index = make_page(db, tmp_path / "site", "--sweep", "1")
    ids = set(page.images)
    assert "batch-fault-hold-cpu" in ids and "crash-map-1" in ids
    assert [i for i in ids if i.startswith("timeline-fault-")], ids
    assert page.empty == ["accuracy"]  # the fault worker has no validation accuracy
    # batch 1 and 8 at 1 and 3 held threads: a line per thread count, never their median
    lines = page.series("batch-fault-hold-cpu")
    assert [line["label"] for line in lines] == ["fault, held threads=1", "fault, held threads=3"]
    assert all(line["x"] == [1.0, 8.0] for line in lines)
    html = index.read_text()
    assert "No run recorded a validation accuracy" in html
    assert "SIGSEGV" in html and "memory budget 100 MiB exceeded" in html and "<details>" in html
    assert "sweep 1 &#x27;html-faults&#x27;" in html and "Machine:" in html
    check_screenshot(index, tmp_path)


def test_batch_plot_of_two_sweeps_that_differ_in_threads(tmp_path: Path):
    db = tmp_path / "bench.db"
    for threads in (1, 2):
        assert "2 ok" in run_sweep(tmp_path, THREADS_SWEEP.format(threads=threads), db)
    page, index = make_page(db, tmp_path / "site", "--sweep", "all")
    lines = page.series("batch-fault-hold-cpu")
    assert [line["label"] for line in lines] == ["fault, threads=1", "fault, threads=2"]
    # Each point is its one configuration's run, as recorded: no value made of two configurations.
    with sqlite3.connect(db) as conn:
        recorded = {
            (threads, batch): (spi * 1000, ips)
            for threads, batch, spi, ips in conn.execute(
                "SELECT threads, batch_size, seconds_per_image, images_per_second FROM runs"
            )
        }
    for line, threads in zip(lines, (1, 2), strict=True):
        points = [recorded[(threads, int(x))] for x in line["x"]]
        assert line["ms_per_image"] == pytest.approx([ms for ms, _ in points], rel=1e-12)
        assert line["images_per_second"] == pytest.approx([ips for _, ips in points], rel=1e-12)
    assert "2 configurations, one line each, named by framework and threads" in index.read_text()


def test_only_crashes_still_gives_a_page(db: Path, tmp_path: Path):
    make_page(db, tmp_path / "site", "--sweep", "1")
    (tmp_path / "site" / "plots" / "mine.txt").write_text("a user's notes")
    page, index = make_page(db, tmp_path / "site", "--sweep", "2")
    assert (tmp_path / "site" / "plots" / "mine.txt").exists()
    assert set(page.images) == {"crash-map-1"}
    assert sorted(page.empty) == ["accuracy", "batch", "timelines"]
    html = index.read_text()
    assert "No run ended ok with timed epochs" in html and "No run ended ok with resource samples" in html
    # written into the folder of sweep 1's page: that page's plots are gone, a user's file is not
    assert sorted(p.name for p in (tmp_path / "site" / "plots").glob("*.png")) == ["crash-map-1.png"]
    assert html.count("<tr>") >= 3 + 3  # comparison rows and the crash list's
    check_screenshot(index, tmp_path)


def test_timeline_config_picks_the_run(db: Path, tmp_path: Path):
    page, _ = make_page(
        db, tmp_path / "site", "--sweep", "1", "--timeline-config", "batch_size=8,hold_threads=3"
    )
    (timeline,) = [img for i, img in page.images.items() if i.startswith("timeline-")]
    assert "batch=8" in timeline["alt"] and "held threads=3" in timeline["alt"]
    result = bench(db, "report", "--html", str(tmp_path / "x"), "--timeline-config", "batch=8")
    assert result.exit_code == 1 and "--timeline-config" in result.output


def test_html_option_conflicts(db: Path, tmp_path: Path):
    result = bench(db, "report", "--html", str(tmp_path), "--crashes")
    assert result.exit_code == 1 and "--html writes the whole page" in result.output
    result = bench(db, "report", "--timeline-config", "batch_size=8")
    assert result.exit_code == 1 and "only applies with --html" in result.output


def test_text_from_the_database_is_escaped():
    row = {
        "id": 1,
        "framework": "<script>alert(1)</script>",
        "model": "m",
        "device": "cpu",
        "batch_size": 1,
        "optimizer": "sgd",
        "lr": 0.1,
        "threads": 0,
        "outcome": "crash",
        "repeats": 1,
        "epochs": 1,
        "stderr_tail": "</pre><b>boom</b>",
        "reason": "a & b",
        "run_dir": "/r",
        "reproduce": "x",
    }
    html = html_table([row], RESULT_COLUMNS) + crash_list([row], 1)
    assert "<script>" not in html and "<b>" not in html
    assert "&lt;script&gt;" in html and "&lt;/pre&gt;&lt;b&gt;boom" in html and "a &amp; b" in html


def run_id(db: Path, pattern: str) -> int:
    """The id of the run whose `bench report` line matches."""
    out = bench(db, "report", "--sweep", "1").output
    line = next(line for line in out.splitlines() if re.search(pattern, line))
    return int(line.split()[0])


def test_inspect_plot_marks_the_death(db: Path, tmp_path: Path):
    crashed = run_id(db, r"fault:segfault")
    target = tmp_path / "crash.png"
    result = CliRunner().invoke(bench_cli, ["inspect", str(crashed), "--plot", str(target), "--db", str(db)])
    assert result.exit_code == 0, result.output
    assert f"run {crashed} of sweep 1" in result.output  # the text post-mortem is still printed
    image = Image.open(target)
    assert image.format == "PNG" and image.width >= 600 and image.height >= 400


def test_inspect_plot_without_samples_is_one_line_error(db: Path, tmp_path: Path):
    quiet = run_id(db, r"fault:ok")
    target = tmp_path / "none.png"
    result = bench(db, "inspect", str(quiet), "--plot", str(target))
    assert result.exit_code == 1 and not target.exists()
    assert result.output.strip().splitlines() == [
        f"error: run {quiet} has no samples to plot: the sampler was off (sample_interval: 0)"
    ]


@pytest.mark.framework
def test_page_of_a_pytorch_sweep(tmp_path: Path, pytorch_python: Path):
    db = tmp_path / "bench.db"
    assert "4 ok" in run_sweep(tmp_path, PYTORCH, db)
    page, index = make_page(db, tmp_path / "site")
    ids = set(page.images)
    assert {"batch-small-cnn-cpu", "accuracy-pytorch-small-cnn-cpu", "crash-map-1"} <= ids
    assert [i for i in ids if i.startswith("timeline-pytorch-")] and page.empty == []
    assert "Every configuration ended ok" in index.read_text()
    check_screenshot(index, tmp_path)


RUNS_SWEEP = """
name: html-runs
settings: {framework: fault, epochs: 2, warmup_steps: 0, dataset_size: 64, runs: 3, sample_interval: 0}
axes: {batch_size: [4, 8]}
"""


def test_batch_plot_of_several_runs_has_error_bars_from_the_runs(tmp_path: Path):
    db = tmp_path / "bench.db"
    assert "6 ok" in run_sweep(tmp_path, RUNS_SWEEP, db)
    page, _ = make_page(db, tmp_path / "site")
    (plot_id,) = [p for p in page.images if p.startswith("batch-")]
    (line,) = page.series(plot_id)
    with sqlite3.connect(db) as conn:
        spi = {
            b: sorted(
                v for (v,) in conn.execute("SELECT seconds_per_image FROM runs WHERE batch_size = ?", (b,))
            )
            for b in (4, 8)
        }
    for x, ms, low, high in zip(
        line["x"], line["ms_per_image"], line["ms_per_image_low"], line["ms_per_image_high"], strict=True
    ):
        runs = [v * 1000 for v in spi[int(x)]]
        assert ms == pytest.approx(runs[1])  # the median of three runs
        assert runs[0] - 1e-12 <= low <= ms <= high <= runs[-1] + 1e-12  # within the runs' range
    assert line["images_per_second_low"][0] == pytest.approx(1000 / line["ms_per_image_high"][0])
