"""benchmarks/harness/poster_ranking.py on a hand-built database with a known answer: the tie groups,
the × fastest beside the published one, and Kendall's τ-b against the published order."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from benchmarks.harness import poster_ranking

PUBLISHED = """framework,model,device,photos,value,note
pytorch,resnet50,cpu,791,100,
tensorflow,resnet50,cpu,791,200,
mxnet,resnet50,cpu,791,300,
pytorch,resnet50,gpu,791,5,
pytorch,resnet50,cpu,6003,,missing
"""


def database(path: Path, figures: dict[str, list[float]], disturbed: str | None = None) -> Path:
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE runs (id INTEGER PRIMARY KEY, framework, model, device, outcome, "
        "seconds_per_image, disturbed)"
    )
    for framework, values in figures.items():
        for spi in values:
            conn.execute(
                "INSERT INTO runs (framework, model, device, outcome, seconds_per_image, disturbed) "
                "VALUES (?, 'resnet50', 'cpu', 'ok', ?, 0)",
                (framework, spi),
            )
    if disturbed:  # one wild run, flagged: left out
        conn.execute(
            "INSERT INTO runs (framework, model, device, outcome, seconds_per_image, disturbed) "
            "VALUES (?, 'resnet50', 'cpu', 'ok', 99.0, 1)",
            (disturbed,),
        )
    conn.commit()
    conn.close()
    return path


RUNS = [1.0, 1.01, 0.99, 1.02, 0.98, 1.0]


def test_the_same_order_as_published_gives_tau_b_of_one(tmp_path):
    figures = {"pytorch": RUNS, "tensorflow": [2 * f for f in RUNS], "mxnet": [3 * f for f in RUNS]}
    cells, left_out = poster_ranking.measured(database(tmp_path / "a.db", figures, disturbed="mxnet"))
    assert left_out == {"mxnet resnet50 ok disturbed": 1} and len(cells["resnet50"]["mxnet"]) == 6
    (csv := tmp_path / "p.csv").write_text(PUBLISHED)
    poster = poster_ranking.published(csv, 791)
    assert poster == {"resnet50": {"pytorch": 100.0, "tensorflow": 200.0, "mxnet": 300.0}}
    found = poster_ranking.model_result(cells["resnet50"], poster["resnet50"])
    assert found["groups"] == [["pytorch"], ["tensorflow"], ["mxnet"]]
    assert found["tau_b"] == pytest.approx(1.0)
    tf = next(r for r in found["rows"] if r["framework"] == "tensorflow")
    assert tf["times_low"] <= 2.0 <= tf["times_high"] and tf["poster_times_fastest"] == 2.0


def test_cells_inside_the_noise_share_a_rank_and_tau_b_counts_the_tie(tmp_path):
    figures = {
        "pytorch": RUNS,
        "tensorflow": [f * 1.001 for f in reversed(RUNS)],
        "mxnet": [3 * f for f in RUNS],
    }
    cells, _ = poster_ranking.measured(database(tmp_path / "b.db", figures))
    (csv := tmp_path / "p.csv").write_text(PUBLISHED)
    found = poster_ranking.model_result(cells["resnet50"], poster_ranking.published(csv, 791)["resnet50"])
    assert found["groups"] == [["pytorch", "tensorflow"], ["mxnet"]]
    assert {r["rank"] for r in found["rows"]} == {"1=", "3"}
    # Pairs: (pt, tf) tied in bench's ranking, the other two concordant: 2 / sqrt(2 × 3).
    assert found["tau_b"] == pytest.approx(2 / 6**0.5)
    assert "| resnet50 | {pytorch, tensorflow} > mxnet |" in poster_ranking.markdown({"resnet50": found}, 791)
