"""The attention models as data (issue 25): the ViT and GPT definitions, their parameter counts,
the pure-Python reference of each new node, the synthetic language, and the sequence_length
setting. Pure Python and numpy: no framework here (each adapter's tests hold its translation to
workers.models.pure)."""

from __future__ import annotations

import math
import random

import pytest
from click.testing import CliRunner

from orchestrator.cli.main import cli as bench_cli
from workers import data, models
from workers.models import pure

# torchvision's vit_b_16 at 1000 classes; GPT-2 small with its output tied to the token embedding
# (Hugging Face's GPT2LMHeadModel counts 124,439,808 unique parameters).
VIT_B16 = 86_567_656
GPT2_SMALL = 124_439_808


def test_the_reference_counts():
    vit = models.build_arch("vit_b16", 1000, 224)
    assert models.infer(vit) == {"output_shape": [1000], "parameters": VIT_B16}
    gpt = models.build_arch("gpt2_small", 10, 224)  # classes and image size do not apply
    assert gpt["input"] == [1024] and gpt["tokens"] and gpt["language"]
    assert models.infer(gpt) == {"output_shape": [1024, 50257], "parameters": GPT2_SMALL}


def test_gpt2_small_term_by_term():
    """Token and position tables, 12 blocks (two layer norms, four D x D projections with biases,
    an MLP of 3072), the final norm; the output projection adds nothing (tied)."""
    d = 768
    block = 2 * 2 * d + 4 * d * (d + 1) + 3072 * (d + 1) + d * (3072 + 1)
    assert 50257 * d + 1024 * d + 12 * block + 2 * d == GPT2_SMALL
    ops = [n["op"] for n in models.build_arch("gpt2_small", 2, 1)["layers"]]
    assert ops[:3] == ["embedding", "position_embedding", "dropout"] and ops[-2:] == [
        "layernorm",
        "tied_output",
    ]


def test_a_shorter_sequence_keeps_every_position_parameter():
    short = models.build_arch("gpt_tiny", 2, 1, sequence_length=16)
    full = models.build_arch("gpt_tiny", 2, 1)
    assert short["input"] == [16] and full["input"] == [models.GPT["gpt_tiny"][1]]
    assert models.infer(short)["output_shape"] == [16, models.GPT["gpt_tiny"][0]]
    assert models.infer(short)["parameters"] == models.infer(full)["parameters"]
    with pytest.raises(ValueError, match="longer than its 128 positions"):
        models.infer(models.build_arch("gpt_tiny", 2, 1, sequence_length=129))


def test_the_vit_follows_the_image_size():
    """One position per patch and one for the class token: the position table grows with the image."""
    at = {size: models.infer(models.build_arch("vit_tiny", 10, size))["parameters"] for size in (16, 32)}
    assert at[32] - at[16] == (64 - 16) * 64
    features = models.build_arch("vit_b16", 1000, 224, features=True)
    assert features["output"] == [768] and features["layers"][-1]["op"] == "first_token"
    assert models.min_image_size("vit_b16") == 16 and models.min_image_size("gpt2_small") == 1


def test_shapes_are_checked():
    with pytest.raises(ValueError, match="4 heads do not divide the width 30"):
        models.out_shape(models.attention(4, False), (5, 30))
    with pytest.raises(ValueError, match=r"attention needs an \(L, D\) sequence"):
        models.out_shape(models.attention(4, False), (3, 8, 8))
    with pytest.raises(
        ValueError, match="tied_output of 7 x 4 does not match its embedding's table of 6 x 4"
    ):
        models.infer(
            {
                "name": "x",
                "input": [3],
                "output": [3, 7],
                "layers": [models.embedding(6, 4), models.tied_output(7)],
            }
        )
    with pytest.raises(ValueError, match="found 0"):
        models.infer({"name": "x", "input": [3, 4], "output": [3, 7], "layers": [models.tied_output(7)]})
    assert models.out_shape(models.patch_embed(8, 4), (3, 17, 12)) == (12, 8)  # 4 x 3 patches, floor


def test_init_rules_of_the_new_nodes():
    assert models.node_init(models.embedding(10, 4))["weight"]["scale"] == "one"
    gpt = models.node_init(models.embedding(10, 4, std=0.02))["weight"]
    assert gpt == {"distribution": "normal", "mean": 0.0, "scale": 0.02}
    assert models.init_scale(gpt["scale"], 10, 4) == 0.02
    fan_in, fan_out = models.fans(models.patch_embed(768, 16), 3)
    assert models.init_scale(models.INIT["patch_embed"]["weight"]["scale"], fan_in, fan_out) == pytest.approx(
        1 / math.sqrt(768)
    )
    # each of the four attention projections is D x D: Glorot's bound sqrt(6 / 2D)
    rule = models.INIT["attention"]["weight"]["scale"]
    assert models.init_scale(rule, *models.fans(models.attention(12, True), 768)) == pytest.approx(
        math.sqrt(3 / 768)
    )


# -- the pure reference --------------------------------------------------------------------------


def _matrix(rng, rows, cols, scale=0.5):
    return [[rng.uniform(-scale, scale) for _ in range(cols)] for _ in range(rows)]


def _attention_params(rng, d):
    p = {}
    for name in ("q", "k", "v", "out"):
        p[name + "_weight"] = _matrix(rng, d, d)
        p[name + "_bias"] = [rng.uniform(-0.1, 0.1) for _ in range(d)]
    return p


def test_gelu_and_layernorm_values():
    # Phi(1) = 0.8413447460685429; the tanh form is within 2e-4 of it
    assert pure.gelu([1.0])[0] == pytest.approx(0.8413447460685429, abs=1e-12)
    assert pure.gelu([1.0], "tanh")[0] == pytest.approx(0.8411919906082768, abs=1e-12)
    assert pure.gelu([-3.0, 0.0]) == [pytest.approx(-3 * 0.0013498980316301035), 0.0]
    out = pure.layernorm([1.0, 2.0, 3.0, 6.0], [1.0] * 4, [0.0] * 4, 0.0)
    assert sum(out) == pytest.approx(0.0, abs=1e-12) and sum(v * v for v in out) / 4 == pytest.approx(1.0)
    scaled = pure.layernorm([1.0, 2.0, 3.0, 6.0], [2.0] * 4, [0.5] * 4, 0.0)
    assert scaled == [pytest.approx(2 * v + 0.5) for v in out]


def test_one_head_attention_by_hand():
    """With identity projections and no biases, one head: softmax(x x^T / sqrt(d)) x."""
    x = [[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]]
    eye = [[1.0, 0.0], [0.0, 1.0]]
    p = {k + "_weight": eye for k in ("q", "k", "v", "out")}
    p.update({k + "_bias": [0.0, 0.0] for k in ("q", "k", "v", "out")})
    got = pure.attention(x, p, heads=1, causal=False)
    for i in range(3):
        scores = [sum(a * b for a, b in zip(x[i], x[j], strict=True)) / math.sqrt(2) for j in range(3)]
        w = [math.exp(s) / sum(math.exp(t) for t in scores) for s in scores]
        assert got[i] == [pytest.approx(sum(w[j] * x[j][c] for j in range(3))) for c in range(2)]
    causal = pure.attention(x, p, heads=1, causal=True)
    assert causal[0] == pytest.approx(x[0])  # the first position sees only itself


def test_heads_split_the_width():
    """Two heads of width 2 over D = 4 give what each head alone computes on its own columns."""
    rng = random.Random(0)
    x = _matrix(rng, 3, 4, 1.0)
    eye = [[float(i == j) for j in range(4)] for i in range(4)]
    p = {k + "_weight": eye for k in ("q", "k", "v", "out")}
    p.update({k + "_bias": [0.0] * 4 for k in ("q", "k", "v", "out")})
    both = pure.attention(x, p, heads=2, causal=False)
    eye2 = [[1.0, 0.0], [0.0, 1.0]]
    p2 = {k + "_weight": eye2 for k in ("q", "k", "v", "out")}
    p2.update({k + "_bias": [0.0] * 2 for k in ("q", "k", "v", "out")})
    left = pure.attention([r[:2] for r in x], p2, heads=1, causal=False)
    right = pure.attention([r[2:] for r in x], p2, heads=1, causal=False)
    assert both == [pytest.approx(a + b) for a, b in zip(left, right, strict=True)]


def test_causal_masking_in_the_reference():
    """A later token cannot change an earlier position's output, with the mask; without, it does."""
    rng = random.Random(1)
    p = _attention_params(rng, 4)
    x = _matrix(rng, 5, 4, 1.0)
    changed = [list(r) for r in x]
    changed[3] = [v + 1.0 for v in changed[3]]
    a, b = pure.attention(x, p, 2, True), pure.attention(changed, p, 2, True)
    assert a[:3] == b[:3] and a[3] != b[3]
    assert pure.attention(x, p, 2, False)[0] != pure.attention(changed, p, 2, False)[0]


def test_patch_embedding_reads_the_grid_row_by_row():
    image = [[[float(100 * c + 10 * i + j) for j in range(4)] for i in range(4)] for c in range(2)]
    # one output channel that picks the top-left pixel of channel 1 of each patch
    weight = [[[[0.0, 0.0], [0.0, 0.0]], [[1.0, 0.0], [0.0, 0.0]]]]
    out = pure.patch_embed(image, weight, [0.5], 2)
    assert out == [[100.5], [102.5], [120.5], [122.5]]


def test_a_tiny_gpt_forward_and_its_causal_mask():
    arch = models.build_arch("gpt_tiny", 2, 1, sequence_length=4)
    rng = random.Random(2)
    vocab, _, d, _, _, mlp = models.GPT["gpt_tiny"]
    params = {}
    for path, node in pure.parameter_paths(arch["layers"]):
        op = node["op"]
        if op == "embedding":
            params[path] = {"weight": _matrix(rng, vocab, d)}
        elif op == "position_embedding":
            params[path] = {"weight": _matrix(rng, node["length"], d)}
        elif op == "layernorm":
            params[path] = {"weight": [1.0 + rng.uniform(-0.1, 0.1) for _ in range(d)], "bias": [0.1] * d}
        elif op == "attention":
            params[path] = _attention_params(rng, d)
        elif op == "dense":
            width = mlp if node["out"] == mlp else d
            inner = d if node["out"] == mlp else mlp
            params[path] = {"weight": _matrix(rng, width, inner, 0.1), "bias": [0.0] * width}
    one = pure.forward(arch["layers"], params, [5, 9, 3, 7])
    two = pure.forward(arch["layers"], params, [5, 9, 3, 8])
    assert len(one) == 4 and len(one[0]) == vocab
    assert one[:3] == two[:3] and one[3] != two[3]


# -- the synthetic language ----------------------------------------------------------------------


def test_the_synthetic_language_is_learnable_and_deterministic():
    config = {"model": "gpt_tiny", "dataset_size": 50, "val_fraction": 0.2, "seed": 3, "sequence_length": 32}
    one, two = data.load(config), data.load(config)
    assert all((one[k] == two[k]).all() for k in one)
    assert one["x_train"].shape == (40, 32) and one["y_val"].shape == (10, 32)
    assert (one["x_train"][:, 1:] == one["y_train"][:, :-1]).all()  # targets are the next tokens
    vocab = models.GPT["gpt_tiny"][0]
    assert one["x_train"].min() >= 0 and one["y_train"].max() < vocab
    # the most common successor of each token is its rule's: about FOLLOW of the time
    x, y = one["x_train"].ravel(), one["y_train"].ravel()
    best = {}
    for a, b in zip(x.tolist(), y.tolist(), strict=True):
        best.setdefault(a, {}).setdefault(b, 0)
        best[a][b] += 1
    hits = sum(max(c.values()) for c in best.values())
    assert 0.7 < hits / len(x) < 0.95
    other = data.load(dict(config, seed=4))
    assert not (other["x_train"] == one["x_train"]).all()
    default = data.load({"model": "gpt_tiny", "dataset_size": 4, "val_fraction": 0.25, "seed": 0})
    assert default["x_train"].shape == (3, models.GPT["gpt_tiny"][1])  # the context


# -- the setting -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "settings, message",
    [
        (
            "model: gpt_tiny\nsequence_length: 200",
            "sequence_length: 200 tokens is longer than gpt_tiny's context of 128",
        ),
        ("model: gpt_tiny\nsequence_length: 0", "sequence_length"),
        ("model: gpt_tiny\ndataset: cifar10\ndata_dir: /tmp", "model gpt_tiny reads synthetic language"),
        ("model: gpt_tiny\ntask: inference\nfeatures: true", "features: a language model has no pooled"),
    ],
)
def test_bad_sequence_settings_name_the_key(tmp_path, settings, message):
    matrix = tmp_path / "m.yaml"
    matrix.write_text(
        "name: t\nsettings:\n"
        + "".join(f"  {line}\n" for line in settings.splitlines())
        + "axes:\n  framework: [pytorch]\n"
    )
    result = CliRunner().invoke(bench_cli, ["run", "--matrix", str(matrix), "--db", str(tmp_path / "b.db")])
    assert result.exit_code == 1
    assert message in result.output and str(matrix) in result.output
    assert "Traceback" not in result.output


def test_a_sequence_length_in_settings_is_for_the_language_models_only(tmp_path):
    """One matrix holds image and language models: settings' sequence_length reaches only the
    latter; on an axis with another model it is still refused."""
    from orchestrator.config.matrix import load_matrix
    from orchestrator.errors import ConfigError

    matrix = tmp_path / "m.yaml"
    matrix.write_text(
        "settings:\n  sequence_length: 16\naxes:\n  framework: [pytorch]\n  model: [resnet50, gpt_tiny]\n"
    )
    configs = {c.model: c for c in load_matrix(matrix).configs}
    assert configs["resnet50"].sequence_length is None and configs["gpt_tiny"].sequence_length == 16
    matrix.write_text("axes:\n  model: [resnet50, gpt_tiny]\n  sequence_length: [16]\n")
    with pytest.raises(ConfigError, match=r"m.yaml:3: sequence_length: only applies to the language models"):
        load_matrix(matrix)


def test_a_version_7_database_gains_the_sequence_columns_and_keeps_its_rows(tmp_path):
    """Schema 8 adds runs.sequence_length and runs.tokens_per_second; a version 7 file (the
    schema as it was, tests/data/schema_v7.sql) is brought up and its rows read back unchanged."""
    import json
    import sqlite3
    from pathlib import Path

    from orchestrator.config.run_config import RunConfig
    from orchestrator.storage.db import Database, schema_version

    old = tmp_path / "bench.db"
    conn = sqlite3.connect(old)
    conn.executescript((Path(__file__).parent / "data" / "schema_v7.sql").read_text())
    conn.execute(
        "INSERT INTO sweeps (name, started_at, status, total_configs, host, machine, bench_version, command) "
        "VALUES ('s', 't', 'finished', 1, 'h', 'm', 'v', 'c')"
    )
    config = RunConfig(framework="pytorch", model="gru", classes=2)
    conn.execute(
        "INSERT INTO runs (sweep_id, config_hash, framework, model, device, batch_size, optimizer, lr, "
        "momentum, epochs, warmup_steps, repeats, timeout, dataset, dataset_size, image_size, classes, "
        "val_fraction, threads, seed, config_json, outcome, started_at, ended_at, wall_seconds, "
        "run_dir, worker_command, reproduce, images_per_second) VALUES (1, ?, 'pytorch', 'gru', 'cpu', 32, "
        "'sgd', 0.01, 0.9, 1, 2, 1, 300, 'synthetic', 256, 64, 2, 0.2, 0, 0, ?, 'ok', 't', 't', 1, 'd', "
        "'w', 'r', 12.5)",
        (config.config_hash, json.dumps(config.to_dict())),
    )
    conn.commit()
    conn.close()
    Database(str(old), create=False).close()
    conn = sqlite3.connect(old)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == schema_version() >= 8
    columns = {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
    assert {"sequence_length", "tokens_per_second"} <= columns
    query = "SELECT model, images_per_second, sequence_length, tokens_per_second FROM runs"
    row = conn.execute(query).fetchone()
    assert row == ("gru", 12.5, None, None)  # nothing recorded is changed or made up
    conn.close()
    result = CliRunner().invoke(bench_cli, ["inspect", "1", "--db", str(old)])
    assert result.exit_code == 0 and "tokens/s" not in result.output
