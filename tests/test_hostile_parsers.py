"""Hostile input at the parsers and at the CLI's error boundary (issue 21).

Every value bench parses (a matrix, --only/--where/--sweep/--compare, a run id, a size, a CPU list)
gives a result or the project's one-line error: never another exception, never a hang, never more
memory than a stated bound. Anything else that goes wrong at the CLI is one line that names the
file holding its traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.cli.main import cli as bench_cli
from orchestrator.config import matrix as matrix_module
from orchestrator.config.filters import parse_id, parse_only
from orchestrator.config.matrix import MAX_FILE_BYTES, SECTIONS, load_matrix
from orchestrator.config.run_config import (
    FIELD_NAMES,
    INT_LIMITS,
    SQLITE_INT_MAX,
)
from orchestrator.config.values import MAX_CPUS, MAX_SIZE, cpu_set, parse_cpus, parse_size
from orchestrator.errors import ConfigError
from orchestrator.report.query.select import ALL, parse_sweeps
from tests.conftest import bench_command

BIG = str(2**70)  # beyond SQLite's signed 64-bit INTEGER
HUGE = "9" * 30
# Digits that str.isdigit, int() or a regex's \d accept, but that are no number bench reads.
ODD_DIGITS = ["²", "١٢", "٣", "߁", "𝟙", "1_000", "⁹"]
# What a parser may allocate for one small input, whatever it holds (tracemalloc's peak).
PARSER_PEAK = 1 << 20
LOADER_PEAK = 16 << 20
HYPOTHESIS = settings(
    max_examples=60,
    deadline=5000,  # milliseconds: a slow shared machine, but no hang
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def peak(call: Callable[[], Any]) -> tuple[Any, int]:
    """The call's result (or the exception it raised) and the peak memory it traced."""
    tracemalloc.start()
    try:
        try:
            outcome: Any = call()
        except Exception as exc:  # noqa: BLE001 - the caller decides which exceptions are allowed
            outcome = exc
        return outcome, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def one_line_error(result: Any) -> str:
    """The CLI's error: exit 1, one line on stderr starting with 'error:', no traceback."""
    assert result.exit_code == 1, (result.exit_code, result.output)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]


# --- the CLI, on the examples the issue names --------------------------------------------------


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database holding one finished sweep (one fault run)."""
    folder = tmp_path_factory.mktemp("recorded")
    (folder / "good.yaml").write_text("include:\n  - {framework: fault}\n")
    db = folder / "bench.db"
    result = CliRunner().invoke(
        bench_cli,
        ["run", "--matrix", str(folder / "good.yaml"), "--db", str(db)],
        catch_exceptions=False,
        env={"BENCH_DEBUG": "1"},
    )
    assert result.exit_code == 0, result.output
    return db


REPORT_CASES = [
    (["--where", f"batch_size={BIG}"], "--where: batch_size: expected at most"),
    (["--where", f"seed={HUGE}"], "--where: seed: expected at most"),
    (["--where", "batch_size=١٢"], "--where: batch_size: expected a positive integer"),
    (["--where", "lr=nan"], "--where: lr: expected a positive number"),
    (["--where", "cpus=0-999999999"], "--where: cpus: expected CPU numbers from 0"),
    (["--where", "memory_budget=99999999999999999999TiB"], "--where: memory_budget: expected a size up to"),
    (["--where", ""], "--where: expected key=value"),
    (["--where", ",".join(["seed=1"] * 300)], "--where: 300 values"),
    (["--sweep", BIG], "--sweep"),
    (["--sweep", "²"], "--sweep ²: expected sweep ids"),
    (["--sweep", "١"], "--sweep"),
    (["--sweep", "0"], "--sweep"),
    (["--compare", "1", BIG], "--compare: expected an id"),
    (["--compare", "²", "1"], "--compare: expected an id"),
    (["--table", "comparison", "--where", f"epochs={BIG}"], "--where: epochs:"),
    (["--table", "batch", "--sweep", f"1,{BIG}"], "--sweep"),
    (["--kernels", "--where", f"repeats={BIG}"], "--where: repeats:"),
    (["--resources", "--where", "threads=99999"], "--where: threads: expected at most"),
]


@pytest.mark.parametrize(("args", "message"), REPORT_CASES)
def test_report_options_beyond_range_are_one_line(
    recorded: Path, cli: Any, args: list[str], message: str
) -> None:
    assert message in one_line_error(cli("report", "--db", str(recorded), *args))


@pytest.mark.parametrize("command", ["inspect", "timeline", "rerun"])
@pytest.mark.parametrize("run_id", [BIG, HUGE, "²", "١٢", "0", "1_0"])
def test_run_ids_beyond_range_are_one_line(recorded: Path, cli: Any, command: str, run_id: str) -> None:
    line = one_line_error(cli(command, run_id, "--db", str(recorded)))
    assert f"{command} RUN_ID: expected an id" in line


def test_a_run_id_in_range_but_absent_is_still_not_found(recorded: Path, cli: Any) -> None:
    assert "9223372036854775807" in one_line_error(cli("inspect", str(SQLITE_INT_MAX), "--db", str(recorded)))


MATRIX_CASES = [
    ("memory_budget: 99999999999999999999TiB", "memory_budget: expected a size up to"),
    (f"memory_budget: {'9' * 400}", "memory_budget: expected a size up to"),
    ("memory_budget: 1.0e400", "memory_budget: expected a size such as"),
    ("memory_budget: .inf", "memory_budget: expected a size such as"),
    ("cpus: '0-999999999'", "cpus: expected CPU numbers from 0 to 8191"),
    ("cpus: [0, 99999999999999999999]", "cpus: expected CPU numbers from 0 to 8191"),
    ("cpus: '²'", "cpus: expected CPU numbers such as"),
    ("cpus: '١-٣'", "cpus: expected CPU numbers such as"),
    (f"seed: {BIG}", "seed: expected at most 4294967295"),
    (f"exit_code: {BIG}", "exit_code: expected at most"),
    (f"batch_size: {HUGE}", "batch_size: expected at most"),
    (f"epochs: {BIG}", "epochs: expected at most"),
    (f"after_steps: {BIG}", "after_steps: expected at most"),
    (f"hold_memory_mb: {BIG}", "hold_memory_mb: expected at most"),
    ("timeout: 1.0e300", "timeout: expected a positive number below"),
    ("seconds: 1.0e300", "seconds: expected a non-negative number below"),
    (f"lr: {'9' * 400}", "lr: expected a positive number"),
    ('data_dir: "a\\0b"', "data_dir: expected a folder path"),
]


@pytest.mark.parametrize(("setting", "message"), MATRIX_CASES)
def test_matrix_values_beyond_range_are_one_line(
    write_matrix: Any, cli: Any, setting: str, message: str
) -> None:
    write_matrix(f"settings:\n  framework: fault\n  {setting}\n")
    line = one_line_error(cli("run", "--matrix", "m.yaml", "--dry-run"))
    assert line.startswith("error: m.yaml:3: ") and message in line, line


def test_a_huge_synthetic_dataset_is_refused_at_load(write_matrix: Any, cli: Any) -> None:
    write_matrix("settings:\n  dataset_size: 1000000000\n  image_size: 4096\n  batch_size: 8\n")
    assert "at most 1 TiB" in one_line_error(cli("run", "--matrix", "m.yaml", "--dry-run"))


@pytest.mark.parametrize(
    ("only", "message"),
    [
        ("", "--only: expected key=value, got ''"),
        (",", "--only: expected key=value"),
        (f"seed={BIG}", "--only: seed: expected at most"),
        ("seed=١", "--only: seed: expected a non-negative integer"),
        ("seed=1_0", "--only: seed:"),
    ],
)
def test_only_is_never_empty_nor_beyond_range(write_matrix: Any, cli: Any, only: str, message: str) -> None:
    write_matrix("axes:\n  framework: [fault]\n  seed: [1, 2]\n")
    assert message in one_line_error(cli("run", "--matrix", "m.yaml", "--dry-run", "--only", only))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--batch-size", BIG], "--batch-size: expected at most"),
        (["--lr", "0.1,lr=0.2"], "--lr: expected a positive number"),
        (["--model", "small_cnn,model=vgg16"], "--model: unknown model"),
        (["--cpus", "0-999999999"], "--cpus: expected CPU numbers from 0"),
        (["--memory-budget", "1e400"], "--memory-budget: expected a size"),
        (["--seed", "²"], "--seed: expected a non-negative integer"),
    ],
)
def test_train_options_beyond_range_are_one_line(
    workdir: Path, cli: Any, args: list[str], message: str
) -> None:
    line = one_line_error(cli("train", "--framework", "fault", *args))
    assert message in line and not (workdir / "bench.db").exists()


@pytest.mark.parametrize(
    ("option", "value"), [("--classes", BIG), ("--image-size", HUGE), ("--classes", "²")]
)
def test_models_options_beyond_range_are_one_line(workdir: Path, cli: Any, option: str, value: str) -> None:
    assert f"error: {option}: " in one_line_error(cli("models", option, value))


def test_a_real_process_prints_one_line_for_an_overflowing_id(recorded: Path) -> None:
    proc = subprocess.run(
        bench_command("report", "--db", str(recorded), "--compare", "1", BIG),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1 and proc.stderr.startswith("error: --compare: ")
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


# --- YAML oddities at the loader ---------------------------------------------------------------


def load_error(path: Path, text: str | bytes) -> str:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    started = time.monotonic()
    outcome, used = peak(lambda: load_matrix(path))
    assert time.monotonic() - started < 10
    assert used < LOADER_PEAK, used
    assert isinstance(outcome, ConfigError), outcome
    message = str(outcome)
    assert message.startswith(f"{path}:") and "\n" not in message
    return message[len(str(path)) :]


LAUGHS = "lol: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 10)
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (LAUGHS, ":1: lol: unknown key"),
        (
            "settings: &s\n  cpus: &c [" + ", ".join(["*c"] * 9) + "]\n",
            ":2: cpus: expected a single value, got a list",
        ),
        ("axes:\n  l0: &l0 [1, 1]\n", ":2: l0: unknown key"),
        ("a: &a [1]\nsettings: {cpus: *a}\n", ":1: a: unknown key"),
        ("[" * 200_000, ":1: yaml: nesting deeper than 20 levels"),
        ("settings: " + "{a: " * 50_000, ":1: yaml: nesting deeper than 20 levels"),
        ("".join(" " * i + f"k{i}:\n" for i in range(60)), ":20: yaml: nesting deeper than 20 levels"),
        ("#" * (MAX_FILE_BYTES + 1), ":1: matrix: the file is larger than 1024 KiB"),
        (
            "settings:\n  seed: !!python/object/apply:os.system ['touch PWNED']\n",
            ":2: seed: expected a single",
        ),
        ("settings:\n  seed: !!python/name:os.system ''\n", ":2: seed: cannot read value"),
        ("settings: !!python/object:os.system {}\n", ":1: settings: expected a mapping, got a tag"),
        (b"settings:\n  seed: 1\n  model: \xff\xfe\n", ":3: matrix: the file is not UTF-8 text"),
        ("settings:\n  seed: 1\x00\n", ":2: yaml: special characters are not allowed"),
        ('settings:\n  model: "small\\0cnn"\n', ":2: model: unknown model 'small\\x00cnn'"),
        ("settings:\n  seed: 1\n  seed: 2\n", ":3: seed: duplicate key (first given on line 2)"),
        ("axes:\n  seed: [1]\naxes:\n  seed: [2]\n", ":3: axes: duplicate key (first given on line 1)"),
        ("settings:\n  lr: " + "9" * 5000 + "\n", ":2: lr: "),
        ("settings:\n  model: " + "x" * 200_000 + "\n", ":2: model: unknown model 'xxxx"),
        (
            "include:\n  - &e {framework: fault}\n" + "  - *e\n" * 10_000,
            ":2: include: 10001 entries (at most 10000)",
        ),
    ],
)
def test_yaml_oddities_are_one_line_with_the_line(tmp_path: Path, text: str | bytes, expected: str) -> None:
    assert load_error(tmp_path / "m.yaml", text).startswith(expected)
    assert not (Path.cwd() / "PWNED").exists()


def test_an_unbounded_file_is_read_only_to_the_limit(tmp_path: Path) -> None:
    """/dev/zero never ends: the loader reads one byte past its limit and stops."""
    outcome, used = peak(lambda: load_matrix("/dev/zero"))
    assert isinstance(outcome, ConfigError) and "larger than 1024 KiB" in str(outcome)
    assert used < 4 * MAX_FILE_BYTES


def test_many_exclude_key_sets_over_many_combinations_are_refused_quickly(tmp_path: Path) -> None:
    seeds = ", ".join(map(str, range(2000)))
    keys = sorted(INT_LIMITS)[:12]
    entries = "".join(
        f"  - {{{a}: {INT_LIMITS[a][0]}, {b}: {INT_LIMITS[b][0]}}}\n" for a in keys for b in keys if a < b
    )
    epochs = ", ".join(map(str, range(1, 21)))  # 40,000 combinations, 66 sets of keys
    text = (
        f"settings: {{framework: fault}}\naxes:\n  seed: [{seeds}]\n  epochs: [{epochs}]\nexclude:\n{entries}"
    )
    assert "different sets of keys is too much to check" in load_error(tmp_path / "m.yaml", text)


def test_exclude_by_key_sets_keeps_its_meaning(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        "settings: {framework: fault}\naxes:\n  seed: [1, 2, 3]\n  epochs: [1, 2]\n"
        "exclude:\n  - {seed: 1}\n  - {seed: 2, epochs: 2}\n  - {epochs: 2, seed: 3}\n  - {seed: 9}\n"
    )
    kept = [(c.seed, c.epochs) for c in load_matrix(path).configs]
    assert kept == [(2, 1), (3, 1)]


# --- the catch-all: anything unexpected is one line naming its traceback file -------------------


def boom(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("something bench did not expect \x1b[31m\nsecond line")


def invoke_quiet(args: list[str], env: dict[str, str]) -> Any:
    return CliRunner().invoke(bench_cli, args, catch_exceptions=False, env={"BENCH_DEBUG": "", **env})


def test_an_internal_error_is_one_line_naming_its_traceback(
    write_matrix: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_matrix("include:\n  - {framework: fault}\n")
    monkeypatch.setattr(matrix_module, "load_matrix", boom)
    state = tmp_path / "state"
    result = invoke_quiet(["run", "--matrix", "m.yaml"], {"XDG_STATE_HOME": str(state)})
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    prefix = (
        "bench: internal error (RuntimeError: something bench did not expect \\x1b[31m\\x0asecond line); "
    )
    assert line.startswith(prefix) and line.endswith("; run again with --debug to see it here")
    path = Path(line[len(prefix) :].split("; ")[0].removeprefix("the full traceback is in "))
    assert path.parent == state / "bench" / "tracebacks"
    text = path.read_text()
    assert "Traceback (most recent call last)" in text and "in boom" in text and "RuntimeError" in text
    assert path.stat().st_mode & 0o777 == 0o600


def test_the_traceback_goes_to_a_temporary_file_where_the_state_folder_cannot_be_made(
    write_matrix: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_matrix("include:\n  - {framework: fault}\n")
    monkeypatch.setattr(matrix_module, "load_matrix", boom)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    result = invoke_quiet(["run", "--matrix", "m.yaml"], {"XDG_STATE_HOME": str(blocker)})
    (line,) = result.stderr.splitlines()
    path = Path(line.split("the full traceback is in ")[1].split("; ")[0])
    try:
        assert result.exit_code == 1 and path.parent != blocker and "in boom" in path.read_text()
    finally:
        path.unlink()


@pytest.mark.parametrize(("args", "env"), [(["--debug"], {}), ([], {"BENCH_DEBUG": "1"})])
def test_debug_shows_the_traceback_here(
    write_matrix: Any, monkeypatch: pytest.MonkeyPatch, args: list[str], env: dict[str, str]
) -> None:
    write_matrix("include:\n  - {framework: fault}\n")
    monkeypatch.setattr(matrix_module, "load_matrix", boom)
    with pytest.raises(RuntimeError, match="did not expect"):
        invoke_quiet([*args, "run", "--matrix", "m.yaml"], env)


def test_errors_with_a_meaning_keep_it(write_matrix: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    usage = invoke_quiet(["run"], {})  # a usage error: click's message and exit 2
    assert usage.exit_code == 2 and "Missing option '--matrix'" in usage.stderr
    write_matrix("include:\n  - {framework: fault}\n")

    def interrupted(*args: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(matrix_module, "load_matrix", interrupted)
    result = invoke_quiet(["run", "--matrix", "m.yaml"], {})
    assert result.exit_code == 1 and "Aborted!" in result.stderr and "internal error" not in result.stderr


def test_an_internal_error_in_a_real_process_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text("include:\n  - {framework: fault}\n")
    code = (
        "import orchestrator.config.matrix as m\n"
        "def boom(path):\n    raise LookupError('no such thing')\n"
        "m.load_matrix = boom\n"
        "from orchestrator.cli.main import main\nmain()\n"
    )
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "BENCH_DEBUG": ""}
    proc = subprocess.run(
        [sys.executable, "-c", code, "run", "--matrix", "m.yaml"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("bench: internal error (LookupError: no such thing); the full traceback is")
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    (saved,) = (tmp_path / "state" / "bench" / "tracebacks").iterdir()
    assert "LookupError" in saved.read_text()


def test_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    """`bench ... | head`: the reader goes away; bench stops without a traceback or an error line."""
    seeds = ", ".join(map(str, range(3000)))
    (tmp_path / "m.yaml").write_text(f"settings: {{framework: fault}}\naxes:\n  seed: [{seeds}]\n")
    proc = subprocess.Popen(
        bench_command("run", "--matrix", "m.yaml", "--dry-run"),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "BENCH_DEBUG": ""},
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(10)
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 1
    assert stderr == "" and not (tmp_path / "state").exists()


# --- property-based: any input is a result or the one-line error -------------------------------

NUMBER_TEXT = st.from_regex(r"\A\s?[+-]?[0-9]{0,25}(\.[0-9]{0,25})?(e[+-]?[0-9]{1,4})?\s?[A-Za-z]{0,4}\s?\Z")
ANY_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.floats(),
    st.text(max_size=40),
    NUMBER_TEXT,
    st.sampled_from(ODD_DIGITS),
)


@HYPOTHESIS
@given(ANY_SCALAR)
def test_parse_size_is_a_bounded_size_or_value_error(value: Any) -> None:
    outcome, used = peak(lambda: parse_size(value))
    assert used < PARSER_PEAK
    if isinstance(outcome, Exception):
        assert isinstance(outcome, ValueError) and "\n" not in str(outcome), outcome
    else:
        assert isinstance(outcome, int) and 0 < outcome <= MAX_SIZE


CPU_TEXT = st.text(alphabet="0123456789-, ²١٣\t", max_size=40)
CPU_ITEM = st.one_of(
    st.integers(), st.integers(min_value=-2, max_value=2**70), CPU_TEXT, st.none(), st.floats()
)


@HYPOTHESIS
@given(st.one_of(CPU_TEXT, st.text(max_size=20), st.integers(), st.lists(CPU_ITEM, max_size=8), ANY_SCALAR))
def test_parse_cpus_is_a_bounded_list_or_value_error(value: Any) -> None:
    outcome, used = peak(lambda: parse_cpus(value))
    assert used < PARSER_PEAK
    if isinstance(outcome, Exception):
        assert isinstance(outcome, ValueError) and "\n" not in str(outcome), outcome
    else:
        cpus = cpu_set(outcome)
        assert cpus and max(cpus) < MAX_CPUS and parse_cpus(outcome) == outcome


def test_parse_cpus_refuses_a_billion_cpus_without_building_them() -> None:
    outcome, used = peak(lambda: parse_cpus("0-999999999"))
    assert isinstance(outcome, ValueError) and used < PARSER_PEAK


FILTER_ITEM = st.tuples(
    st.one_of(st.sampled_from(FIELD_NAMES), st.text(max_size=8)),
    st.one_of(ANY_SCALAR.map(str), st.sampled_from(["pytorch", "fault", "cpu", "true", "0-3", "512MiB"])),
).map(lambda kv: f"{kv[0]}={kv[1]}")
FILTER_TEXT = st.one_of(st.lists(FILTER_ITEM, max_size=5).map(",".join), st.text(max_size=60))


@HYPOTHESIS
@given(FILTER_TEXT, st.sampled_from(["--only", "--where", "--timeline-config"]))
def test_filters_are_validated_values_or_one_config_error(text: str, option: str) -> None:
    outcome, used = peak(lambda: parse_only(text, option))
    assert used < PARSER_PEAK
    if isinstance(outcome, Exception):
        assert isinstance(outcome, ConfigError), outcome
        assert str(outcome).startswith(f"{option}: ") and "\n" not in str(outcome)
        return
    assert outcome and set(outcome) <= set(FIELD_NAMES)
    for key, values in outcome.items():
        for value in values:
            if isinstance(value, int) and not isinstance(value, bool):
                low, high = INT_LIMITS[key] if key in INT_LIMITS else (0, MAX_SIZE)
                assert low <= value <= high <= SQLITE_INT_MAX


@HYPOTHESIS
@given(st.lists(st.one_of(st.text(max_size=30), st.integers().map(str), st.just(BIG)), max_size=4))
def test_sweep_ids_are_in_range_or_one_config_error(values: list[str]) -> None:
    try:
        wanted = parse_sweeps(values)
    except ConfigError as exc:
        assert str(exc).startswith("--sweep") and "\n" not in str(exc)
        return
    assert wanted is None or wanted == ALL or all(1 <= i <= SQLITE_INT_MAX for i in wanted)


@HYPOTHESIS
@given(st.one_of(st.text(max_size=30), st.integers().map(str), st.sampled_from(ODD_DIGITS)))
def test_ids_are_in_range_or_one_config_error(text: str) -> None:
    try:
        run_id = parse_id(text, "RUN_ID")
    except ConfigError as exc:
        assert str(exc).startswith("RUN_ID: expected an id")
        return
    assert 1 <= run_id <= SQLITE_INT_MAX and text.strip().isascii()


def check_load(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    outcome, used = peak(lambda: load_matrix(path))
    assert used < LOADER_PEAK
    if isinstance(outcome, Exception):
        assert isinstance(outcome, ConfigError), repr(outcome)
        assert str(outcome).startswith(f"{path}:") and "\n" not in str(outcome)
    else:
        assert outcome.configs


@HYPOTHESIS
@given(st.one_of(st.text(max_size=300).map(str.encode), st.binary(max_size=300)))
def test_the_loader_on_any_text_is_a_matrix_or_one_config_error(tmp_path: Path, data: bytes) -> None:
    check_load(tmp_path / "m.yaml", data)


VALUES = st.one_of(
    ANY_SCALAR,
    st.sampled_from(["fault", "pytorch", "small_cnn", "gru", "cpu", "sgd", "imdb", "0-3", "1GiB", "kernels"]),
)
KEYS = st.one_of(st.sampled_from(FIELD_NAMES), st.sampled_from(SECTIONS), st.text(max_size=6))
TREES = st.recursive(
    VALUES,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(KEYS, children, max_size=4)),
    max_leaves=25,
)
MATRICES = st.fixed_dictionaries(
    {},
    optional={
        "name": VALUES,
        "settings": st.dictionaries(st.sampled_from(FIELD_NAMES), TREES, max_size=5),
        "axes": st.dictionaries(KEYS, st.lists(VALUES, max_size=4) | TREES, max_size=3),
        "exclude": st.lists(st.dictionaries(KEYS, VALUES, max_size=3), max_size=3) | TREES,
        "include": st.lists(st.dictionaries(st.sampled_from(FIELD_NAMES), VALUES, max_size=3), max_size=3),
        "extra": TREES,
    },
)


@HYPOTHESIS
@given(MATRICES, st.booleans())
def test_the_loader_on_structured_random_matrices_is_a_matrix_or_one_config_error(
    tmp_path: Path, tree: dict[str, Any], flow: bool
) -> None:
    text = yaml.safe_dump(tree, default_flow_style=flow, allow_unicode=True)
    check_load(tmp_path / "m.yaml", text.encode())


@pytest.mark.parametrize("address", ["head:99999999", "head:²", "head:٦٣٧٩", "he\x00ad:6379", "head:0"])
def test_a_ray_address_outside_a_port_range_is_one_config_error(address: str) -> None:
    from orchestrator.executors.ray_cluster import check_reachable

    with pytest.raises(ConfigError, match="expected HOST:PORT"):
        check_reachable(address)
