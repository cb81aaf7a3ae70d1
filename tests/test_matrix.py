"""Fast tests of the matrix loader and the --only filter: no framework, no subprocess."""

from __future__ import annotations

import hashlib
import itertools
import logging
from pathlib import Path

import pytest

from orchestrator.config.matrix import Matrix, load_matrix, parse_only, select
from orchestrator.config.run_config import RunConfig
from orchestrator.errors import ConfigError

EXAMPLE = """\
name: quick
description: two models, two batch sizes
settings:
  epochs: 1
  timeout: 300
axes:
  framework: [pytorch]
  model: [small_cnn, resnet50]
  batch_size: [8, 32]
exclude:
  - {model: resnet50, batch_size: 32}
include:
  - {framework: fault, fault: segfault}
"""


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Errors name the file as the user gave it: work in tmp_path so that is plain "m.yaml".
    monkeypatch.chdir(tmp_path)


def load(text: str, name: str = "m.yaml") -> Matrix:
    Path(name).write_text(text)
    return load_matrix(name)


def error(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        load(text)
    message = str(info.value)
    assert "\n" not in message
    return message


def shape(matrix: Matrix) -> list[tuple[str, str, int]]:
    return [(c.framework, c.model, c.batch_size) for c in matrix.configs]


# --- good files -----------------------------------------------------------------------------


def test_example_product_exclude_include_in_order() -> None:
    matrix = load(EXAMPLE)
    assert matrix.name == "quick"
    assert matrix.description == "two models, two batch sizes"
    assert matrix.path == Path("m.yaml")
    assert shape(matrix) == [
        ("pytorch", "small_cnn", 8),
        ("pytorch", "small_cnn", 32),
        ("pytorch", "resnet50", 8),
        ("fault", "small_cnn", 32),
    ]
    assert matrix.configs[-1].fault == "segfault"
    assert all(c.timeout == 300.0 and isinstance(c.timeout, float) for c in matrix.configs)


def test_product_size_is_the_product_of_the_axes() -> None:
    matrix = load("axes:\n  model: [small_cnn, resnet50, vgg16]\n  lr: [0.1, 0.01]\n  seed: [1, 2]\n")
    assert len(matrix.configs) == 12
    # The last axis varies fastest.
    assert [(c.model, c.lr, c.seed) for c in matrix.configs[:3]] == [
        ("small_cnn", 0.1, 1),
        ("small_cnn", 0.1, 2),
        ("small_cnn", 0.01, 1),
    ]


def test_precedence_defaults_then_settings_then_axis() -> None:
    matrix = load("settings:\n  lr: 0.5\n  epochs: 3\naxes:\n  lr: [0.1]\n")
    (config,) = matrix.configs
    assert (config.lr, config.epochs, config.seed) == (0.1, 3, RunConfig().seed)


def test_include_takes_defaults_then_settings_then_entry() -> None:
    text = "settings:\n  epochs: 2\n  lr: 0.5\naxes:\n  seed: [1]\ninclude:\n  - {lr: 0.2}\n"
    config = load(text).configs[1]
    assert (config.epochs, config.lr, config.seed) == (2, 0.2, 0)


def test_include_is_not_subject_to_exclude() -> None:
    text = "axes:\n  seed: [1, 2]\nexclude:\n  - {seed: 2}\ninclude:\n  - {seed: 2}\n"
    assert [c.seed for c in load(text).configs] == [1, 2]


def test_exclude_matches_normalised_values() -> None:
    text = "axes:\n  lr: [0.1, 1]\n  timeout: [10, 20]\nexclude:\n  - {lr: 1.0, timeout: 20}\n"
    assert [(c.lr, c.timeout) for c in load(text).configs] == [
        (0.1, 10.0),
        (0.1, 20.0),
        (1.0, 10.0),
    ]


def test_exclude_matching_nothing_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="orchestrator.config.matrix"):
        load("axes:\n  seed: [1, 2]\nexclude:\n  - {seed: 3}\n")
    assert "m.yaml:4: exclude entry matches no configuration" in caplog.text


def test_duplicates_are_dropped_keeping_the_first() -> None:
    text = "axes:\n  seed: [1, 2, 1]\ninclude:\n  - {seed: 2}\n  - {seed: 5}\n"
    assert [c.seed for c in load(text).configs] == [1, 2, 5]


def test_fault_framework_defaults_fault_to_ok() -> None:
    matrix = load("axes:\n  framework: [fault]\ninclude:\n  - {framework: fault, fault: hang}\n")
    assert [c.fault for c in matrix.configs] == ["ok", "hang"]
    assert load("settings: {framework: pytorch}\n").configs[0].fault is None


def test_fault_framework_skips_model_checks() -> None:
    text = "settings:\n  framework: fault\n  model: alexnet\n  image_size: 8\n  batch_size: 999\n"
    assert load(text).configs[0].batch_size == 999


def test_hashes_do_not_depend_on_key_order_in_the_file() -> None:
    a = load("settings:\n  epochs: 2\n  lr: 0.1\ninclude:\n  - {seed: 1, model: vgg16}\n", "a.yaml")
    b = load("include:\n  - {model: vgg16, seed: 1}\nsettings:\n  lr: 0.1\n  epochs: 2\n", "b.yaml")
    assert [c.config_hash for c in a.configs] == [c.config_hash for c in b.configs]
    assert a.file_hash != b.file_hash


def test_axis_order_changes_run_order_not_identity() -> None:
    a = load("axes:\n  seed: [1, 2]\n  model: [small_cnn, vgg16]\n", "a.yaml")
    b = load("axes:\n  model: [small_cnn, vgg16]\n  seed: [1, 2]\n", "b.yaml")
    assert {c.config_hash for c in a.configs} == {c.config_hash for c in b.configs}


def test_file_hash_is_sha256_of_the_bytes() -> None:
    matrix = load(EXAMPLE)
    assert matrix.file_hash == hashlib.sha256(EXAMPLE.encode()).hexdigest()
    assert load(EXAMPLE).file_hash == matrix.file_hash


def test_name_defaults_to_the_file_stem() -> None:
    assert load("settings: {seed: 1}\n", "nightly.yaml").name == "nightly"
    assert load("name:\nsettings: {seed: 1}\n", "nightly.yaml").name == "nightly"


def test_no_axes_is_one_configuration_and_null_sections_are_absent() -> None:
    matrix = load("name: x\ndescription:\nsettings:\naxes:\nexclude:\ninclude:\n")
    assert matrix.configs == (RunConfig(),)
    assert matrix.description == ""


def test_matrix_is_frozen() -> None:
    matrix = load(EXAMPLE)
    with pytest.raises(AttributeError):
        matrix.name = "other"  # type: ignore[misc]


def test_anchors_and_aliases_are_followed() -> None:
    text = "axes:\n  seed: &seeds [1, 2]\ninclude:\n  - {seed: 9}\nexclude:\n  - {seed: 1}\n"
    assert [c.seed for c in load(text).configs] == [2, 9]


# --- errors: FILE:LINE: KEY: message --------------------------------------------------------


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match=r"^nope\.yaml: cannot read matrix file: No such file"):
        load_matrix("nope.yaml")


def test_directory_is_unreadable(tmp_path: Path) -> None:
    (tmp_path / "dir.yaml").mkdir()
    with pytest.raises(ConfigError, match=r"^dir\.yaml: cannot read matrix file: "):
        load_matrix("dir.yaml")


@pytest.mark.parametrize(
    ("text", "prefix"),
    [
        ("settings:\n  epochs: 1\n lr: 2\n", "m.yaml:3: yaml: "),
        ("axes:\n  model: [a, b\n", "m.yaml:3: yaml: "),
        ("name: x\n---\nname: y\n", "m.yaml:2: yaml: "),
        ("name: x\nsettings: {seed: *nowhere}\n", "m.yaml:2: yaml: "),
        ("name: x\n\tsettings: {}\n", "m.yaml:2: yaml: "),
        ("name: x\nx: \x07\n", "m.yaml:2: yaml: "),
        ("[" * 5000, "m.yaml:1: yaml: nesting deeper than 20 levels"),
        ("", "m.yaml:1: matrix: the file is empty"),
        ("# only a comment\n", "m.yaml:1: matrix: the file is empty"),
        ("- settings\n", "m.yaml:1: matrix: expected a mapping, got a list"),
        ("just text\n", "m.yaml:1: matrix: expected a mapping, got 'just text'"),
    ],
)
def test_unreadable_yaml(text: str, prefix: str) -> None:
    assert error(text).startswith(prefix)


def test_not_utf8() -> None:
    Path("m.yaml").write_bytes(b"name: x\ndescription: caf\xe9\n")
    with pytest.raises(ConfigError, match=r"^m\.yaml:2: matrix: the file is not UTF-8 text$"):
        load_matrix("m.yaml")


def test_unknown_top_level_key_suggests_the_closest() -> None:
    assert error("name: x\n\nsetings:\n  epochs: 1\n") == (
        "m.yaml:3: setings: unknown key (did you mean settings?)"
    )
    assert error("colour: red\n").startswith(
        "m.yaml:1: colour: unknown key (expected one of: name, description, settings,"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("settings:\n  epoch: 2\n", "m.yaml:2: epoch: unknown key (did you mean epochs?)"),
        ("axes:\n  modle: [vgg16]\n", "m.yaml:2: modle: unknown key (did you mean model?)"),
        ("exclude:\n  - {seeds: 1}\n", "m.yaml:2: seeds: unknown key (did you mean seed?)"),
        ("include:\n  - frameworks: fault\n", "m.yaml:2: frameworks: unknown key (did you mean"),
        ("settings:\n  zzz: 1\n", "m.yaml:2: zzz: unknown key"),
        ("settings:\n  1: 2\n", "m.yaml:2: 1: unknown key"),
        ("settings:\n  [a]: 2\n", "m.yaml:2: settings: expected a name as key, got a list"),
        ("settings: &s {lr: 0.1}\ninclude:\n  - {<<: *s}\n", "m.yaml:3: <<: merge keys are not"),
    ],
)
def test_unknown_keys_in_sections(text: str, expected: str) -> None:
    assert error(text).startswith(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "settings:\n  epochs: 1\naxes:\n  batch_size:\n    - 8\n    - 16\n    - -4\n",
            "m.yaml:7: batch_size: expected a positive integer, got -4",
        ),
        ("axes:\n  model: [vgg16,\n    resnet5]\n", "m.yaml:3: model: unknown model 'resnet5'"),
        ("settings:\n  lr: 0\n", "m.yaml:2: lr: expected a positive number, got 0"),
        ("settings:\n  lr:\n", "m.yaml:2: lr: expected a positive number, got None"),
        ("settings:\n  momentum: 1.5\n", "m.yaml:2: momentum: expected a non-negative number below 1"),
        ("settings:\n  epochs: true\n", "m.yaml:2: epochs: expected a positive integer, got True"),
        ("settings:\n  device: [cpu]\n", "m.yaml:2: device: expected a single value, got a list"),
        ("settings:\n  seed: {a: 1}\n", "m.yaml:2: seed: expected a single value, got a mapping"),
        ("exclude:\n  - {model: vgg}\n", "m.yaml:2: model: unknown model 'vgg'"),
        ("include:\n  - {seed: x}\n", "m.yaml:2: seed: expected a non-negative integer, got 'x'"),
        ("settings:\n  seed: !!int abc\n", "m.yaml:2: seed: cannot read value 'abc'"),
        ("axes:\n  threads: [1, most]\n", "m.yaml:2: threads: expected all or a non-negative integer"),
        ("settings:\n  seed: !custom 1\n", "m.yaml:2: seed: cannot read value '1'"),
        (
            "settings:\n  fault: !!python/object/apply:os.system [echo]\n",
            "m.yaml:2: fault: expected a single value, got a tag:yaml.org,2002:python/",
        ),
    ],
)
def test_invalid_values_point_at_the_value(text: str, expected: str) -> None:
    assert error(text).startswith(expected)


def test_threads_all_is_every_cpu_the_run_may_use_resolved_as_the_matrix_is_read() -> None:
    import os

    here = len(os.sched_getaffinity(0))
    matrix = load(
        "settings: {threads: all}\naxes:\n  framework: [paddle]\ninclude:\n"
        "  - {framework: pytorch, cpus: [0]}\n  - {framework: pytorch, replicas: 2}\n"
        f"  - {{framework: mxnet, threads: {here}}}\n"
    )
    paddle, pinned, replicated, written = matrix.configs
    assert paddle.threads == here and pinned.threads == 1 and replicated.threads == max(1, here // 2)
    # the count, as if it had been written: the same configuration, hash and all
    assert written.threads == here
    assert paddle.config_hash == RunConfig(framework="paddle", threads=here).config_hash
    # --only threads=all picks what `threads: all` gave on this machine
    chosen = select(matrix.configs, parse_only("threads=all"))
    assert chosen == [c for c in matrix.configs if c.threads == here] and paddle in chosen


def test_unknown_choice_suggests_the_closest() -> None:
    assert error("axes:\n  model: [resnet5]\n").endswith("(did you mean resnet50?)")


def test_yaml_1_1_exponent_gets_a_hint() -> None:
    message = error("settings:\n  lr: 1e-3\n")
    assert message.startswith("m.yaml:2: lr: expected a positive number, got '1e-3'")
    assert "write 0.001 or 1.0e-3" in message
    assert load("settings:\n  lr: 1.0e-3\n").configs[0].lr == 0.001


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "axes:\n  model: vgg16\n",
            "m.yaml:2: model: expected a list of values, got 'vgg16' (write [vgg16] for a single",
        ),
        ("axes:\n  model: []\n", "m.yaml:2: model: an axis needs at least one value"),
        ("axes:\n  model:\n", "m.yaml:2: model: expected a list of values, got null"),
        ("axes:\n  model: {a: 1}\n", "m.yaml:2: model: expected a list of values, got a mapping"),
        ("axes:\n  model: [[vgg16]]\n", "m.yaml:2: model: expected a single value, got a list"),
        ("axes: [model]\n", "m.yaml:1: axes: expected a mapping, got a list"),
        ("settings: 3\n", "m.yaml:1: settings: expected a mapping, got '3'"),
        ("axes:\n  seed: !!set {1, 2}\n", "m.yaml:2: seed: expected a list of values, got a tag"),
    ],
)
def test_bad_axes(text: str, expected: str) -> None:
    assert error(text).startswith(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: a\nname: b\n", "m.yaml:2: name: duplicate key (first given on line 1)"),
        ("settings:\n  lr: 0.1\n  seed: 1\n  lr: 0.2\n", "m.yaml:4: lr: duplicate key (first"),
        ("axes:\n  seed: [1]\n  seed: [2]\n", "m.yaml:3: seed: duplicate key (first given on line 2)"),
        ("include:\n  - {seed: 1, seed: 2}\n", "m.yaml:2: seed: duplicate key (first given on line 2)"),
    ],
)
def test_duplicate_keys(text: str, expected: str) -> None:
    assert error(text).startswith(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("exclude: {seed: 1}\n", "m.yaml:1: exclude: expected a list of mappings, got a mapping"),
        ("include: seed\n", "m.yaml:1: include: expected a list of mappings, got 'seed'"),
        ("exclude:\n  - seed\n", "m.yaml:2: exclude: expected a mapping, got 'seed'"),
        ("include:\n  - {seed: 1}\n  - [seed, 1]\n", "m.yaml:3: include: expected a mapping, got a list"),
        ("include:\n  -\n", "m.yaml:2: include: expected a mapping, got null"),
        ("exclude:\n  - {}\n", "m.yaml:2: exclude: an empty entry would exclude everything"),
    ],
)
def test_bad_exclude_and_include_entries(text: str, expected: str) -> None:
    assert error(text).startswith(expected)


def test_everything_excluded_is_an_error() -> None:
    text = "axes:\n  seed: [1, 2]\n\nexclude:\n  - {seed: 1}\n  - {seed: 2}\ninclude: []\n"
    assert error(text) == (
        "m.yaml:4: exclude: no configurations: every combination is excluded and nothing is included"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("settings:\n  seconds: 2\n", "m.yaml:2: seconds: only applies to framework fault, not pytorch"),
        (
            "axes:\n  framework: [pytorch, fault]\n  fault: [ok, hang]\n",
            "m.yaml:3: fault: only applies to framework fault, not pytorch",
        ),
        ("include:\n  - {framework: fault}\n  - {exit_code: 3}\n", "m.yaml:3: exit_code: only applies"),
        (
            "settings:\n  fault: raise\naxes:\n  framework: [fault, pytorch]\n",
            "m.yaml:2: fault: only applies to framework fault, not pytorch",
        ),
    ],
)
def test_fault_fields_need_the_fault_framework(text: str, expected: str) -> None:
    assert error(text).startswith(expected)


def test_fault_fields_on_excluded_configs_are_fine() -> None:
    text = (
        "settings:\n  seconds: 2\naxes:\n  framework: [pytorch, fault]\nexclude:\n  - {framework: pytorch}\n"
    )
    assert [c.seconds for c in load(text).configs] == [2.0]


def test_batch_larger_than_training_split_names_the_numbers() -> None:
    text = "settings:\n  dataset_size: 40\n  val_fraction: 0.5\naxes:\n  batch_size:\n    - 8\n    - 32\n"
    assert error(text) == (
        "m.yaml:7: batch_size: batch_size 32 is larger than the training split of 20 samples"
        " (dataset_size 40, val_fraction 0.5)"
    )


def test_batch_check_blames_the_most_specific_setting() -> None:
    # batch_size comes from settings, the small dataset from an axis item: blame the axis item.
    text = "settings:\n  batch_size: 64\naxes:\n  dataset_size: [1000, 50]\n"
    assert error(text).startswith("m.yaml:4: dataset_size: batch_size 64 is larger than the")
    # Only the dataset size was set, batch_size is the default (32).
    assert error("include:\n  - {dataset_size: 30}\n").startswith(
        "m.yaml:2: dataset_size: batch_size 32 is larger than the training split of 24 samples"
    )


def test_excluded_combinations_are_not_checked() -> None:
    text = "axes:\n  batch_size: [8, 512]\nexclude:\n  - {batch_size: 512}\n"
    assert [c.batch_size for c in load(text).configs] == [8]


def test_image_size_too_small_for_the_model() -> None:
    text = "settings:\n  image_size: 16\naxes:\n  model:\n    - small_cnn\n    - vgg16\n"
    message = error(text)
    assert message.startswith("m.yaml:6: model: image_size 16 is too small for vgg16")
    text = "settings:\n  model: alexnet\ninclude:\n  - {image_size: 32}\n"
    assert error(text).startswith("m.yaml:4: image_size: image_size 32 is too small for alexnet")


def test_too_many_combinations() -> None:
    values = ", ".join(str(n) for n in range(1, 101))
    text = "axes:\n" + "".join(f"  {key}: [{values}]\n" for key in ("seed", "repeats", "epochs"))
    assert error(text).startswith("m.yaml:2: axes: 1000000 combinations (at most 100000)")


def test_name_must_be_a_non_empty_string() -> None:
    assert error("name: 3\n").startswith("m.yaml:1: name: expected a non-empty string, got 3")
    assert error("name: ' '\n").startswith("m.yaml:1: name: expected a non-empty string")
    assert error("description: [a]\n").startswith("m.yaml:1: description: expected a single value")


# --- fuzz: a bad file is always one ConfigError line, never another exception ---------------

BAD_VALUES = [
    "null",
    "0",
    "-1",
    "true",
    "'text'",
    "[]",
    "{}",
    "[[1]]",
    "[{}]",
    "[null]",
    "{1: 2}",
    "{a: [b]}",
    "!!binary aGk=",
    "2020-01-01",
    ".nan",
    "[1, [2, {3: 4}]]",
]
PLACES = [
    "{v}",
    "{{name: {v}}}",
    "{{description: {v}}}",
    "{{settings: {v}}}",
    "{{settings: {{lr: {v}}}}}",
    "{{settings: {{{v}: 1}}}}",
    "{{axes: {v}}}",
    "{{axes: {{model: {v}}}}}",
    "{{axes: {{model: [{v}]}}}}",
    "{{exclude: {v}}}",
    "{{exclude: [{v}]}}",
    "{{exclude: [{{seed: {v}}}]}}",
    "{{include: {v}}}",
    "{{include: [{v}]}}",
    "{{include: [{{framework: fault, exit_code: {v}}}]}}",
]


@pytest.mark.parametrize(("place", "value"), list(itertools.product(PLACES, BAD_VALUES)))
def test_fuzz_only_config_errors(place: str, value: str) -> None:
    try:
        load(place.format(v=value))
    except ConfigError as exc:
        message = str(exc)
        assert message.startswith("m.yaml:") and "\n" not in message


# --- --only ---------------------------------------------------------------------------------


def test_parse_only_normalises_and_unions() -> None:
    only = parse_only("framework=pytorch, model=resnet50,model=vgg16,lr=0.01,batch_size=8")
    assert only == {
        "framework": frozenset({"pytorch"}),
        "model": frozenset({"resnet50", "vgg16"}),
        "lr": frozenset({0.01}),
        "batch_size": frozenset({8}),
    }
    assert parse_only("timeout=300,lr=1e-3,ignore_sigterm=true") == {
        "timeout": frozenset({300.0}),
        "lr": frozenset({0.001}),
        "ignore_sigterm": frozenset({True}),
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("modle=vgg16", "--only: modle: unknown key (did you mean model?)"),
        ("model=resnet5", "--only: model: unknown model 'resnet5'"),
        ("batch_size=-4", "--only: batch_size: expected a positive integer, got -4"),
        ("lr=fast", "--only: lr: expected a positive number, got 'fast'"),
        ("framework", "--only: expected key=value, got 'framework'"),
        ("framework=", "--only: expected key=value, got 'framework='"),
        ("model=vgg16,", "--only: expected key=value, got ''"),
        ("", "--only: expected key=value, got ''"),
    ],
)
def test_parse_only_errors(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_only(text)
    assert str(info.value).startswith(expected)


def test_parse_only_suggests_values_and_names_the_option() -> None:
    with pytest.raises(ConfigError, match=r"^--skip: model: .*\(did you mean resnet50\?\)$"):
        parse_only("model=resnet5", option="--skip")


def test_select_keeps_order_and_matches_every_key() -> None:
    configs = load(
        "axes:\n  model: [small_cnn, resnet50]\n  batch_size: [8, 16]\n  lr: [0.01, 0.1]\n"
    ).configs
    chosen = select(configs, parse_only("model=resnet50,batch_size=8,batch_size=16,lr=0.01"))
    assert [(c.model, c.batch_size, c.lr) for c in chosen] == [
        ("resnet50", 8, 0.01),
        ("resnet50", 16, 0.01),
    ]
    assert select(configs, {}) == list(configs)
    assert select(configs, parse_only("model=vgg16")) == []


def test_a_runs_label_names_its_mode_and_precision_where_set() -> None:
    """Progress lines and run folders tell a modes matrix's runs apart: they differ in nothing else."""
    text = "settings: {framework: pytorch, model: resnet50}\naxes:\n  mode: [eager, compiled]\n"
    eager, compiled = load(text).configs
    assert eager.label() == "pytorch/resnet50/cpu/bs32/sgd/lr0.01/t0/eager"
    assert compiled.label().endswith("/t0/compiled")
    entry = "{framework: jax, model: resnet50, mode: compiled, precision: bf16}"
    assert load(f"include:\n  - {entry}\n").configs[0].label().endswith("/t0/compiled/bf16")
    assert load("include:\n  - {framework: jax, model: resnet50}\n").configs[0].label().endswith("/t0")


def test_a_traced_runs_label_names_its_trace() -> None:
    """A traced run and its untraced twin (transformers.yaml has both) have different labels."""
    text = "settings: {framework: pytorch, model: resnet50}\naxes:\n  trace: [off, kernels]\n"
    untraced, traced = load(text).configs
    assert untraced.label() == "pytorch/resnet50/cpu/bs32/sgd/lr0.01/t0"
    assert traced.label() == "pytorch/resnet50/cpu/bs32/sgd/lr0.01/t0/trace-kernels"
