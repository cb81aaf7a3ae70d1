"""The guides' commands run as written (issue 44): every command in an `sh` block of
docs/getting-started.md and of docs/how-to/*.md runs here, page by page, and must exit 0.

How a page runs: its `sh` blocks, in page order, make one bash script (`set -e`, so the first
command that fails stops it and is named), run in a folder of its own that looks like the checkout
(a link to each of the repository's top-level entries) with one substitution: `matrices/quick.yaml`
there is QUICK below, the quick matrix's shape on the fault worker (eleven configurations that end
ok, then a segfault after three steps, run 12 in a fresh database, as in the real one), so a page's
`bench run --matrix matrices/quick.yaml` takes seconds, not minutes. Everything else is real: the
committed studies, the shipped matrices, the framework environments (a page that needs one is
marked `framework`), and `bench` itself, found on PATH as a reader who followed the page has it.

A block is not run only where the line before it says so, `<!-- not run: REASON -->`, with a reason
from NOT_RUN (a GPU, a Ray cluster, PostgreSQL, the network, a run longer than the suite allows, or a
change to the shared environments); each such block is counted and listed by the first test. Other
fenced blocks in these pages must be `text` (output) or `yaml` (a file), never a bare fence, so a
command cannot sit in a block the suite does not see.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from orchestrator.provision import env_build
from tests.drivers import framework_python

REPO = Path(__file__).resolve().parent.parent
GUIDES = [REPO / "docs" / "getting-started.md", *sorted((REPO / "docs" / "how-to").glob("*.md"))]

NOT_RUN = (
    "needs a GPU",
    "needs a Ray cluster",
    "needs PostgreSQL",
    "needs the network",
    "runs for",  # longer than the suite may take: say how long
    "deletes",  # a shared environment other tests use
)
LANGUAGES = {"sh", "text", "yaml"}
_FENCE = re.compile(r"^```(\S*)\s*$")
_SKIP = re.compile(r"^<!-- not run: (.+) -->$")

QUICK = """\
# tests/test_guides.py's stand-in for the quick matrix: its shape on the fault worker, seconds.
name: quick
settings: {framework: fault, epochs: 1, warmup_steps: 1, min_steps: 1, min_time: 0,
           dataset_size: 32, batch_size: 8, image_size: 32, classes: 3}
axes:
  model: [small_cnn, resnet50]
  seed: [0, 1, 2, 3, 4]
include:
  - {model: small_cnn, seed: 5}
  - {model: small_cnn, seed: 6, fault: segfault, after_steps: 3}
"""

# What each page's commands need beyond bench and the fault worker, and what its output must show
# (so a page that silently ran nothing of substance does not pass).
NEEDS: dict[str, tuple[str, ...]] = {
    "add-a-framework-or-model.md": ("pytorch",),
    "bring-your-own-environment.md": ("pytorch",),
    "compare-two-releases.md": ("jax",),
}
SHOWS: dict[str, tuple[str, ...]] = {
    "getting-started.md": ("SIGSEGV", "run 12"),
    "compare-two-sweeps.md": ("sweep 1", "sweep 2"),
    "compare-two-releases.md": ("0.4.30", "0.10.2"),
    "run-a-study.md": ("What the re-run says today",),
    "bring-your-own-environment.md": ("external",),
    "use-a-team-database.md": ("sweep(s) added",),
    "check-a-gpu.md": ("transformers",),
    "add-a-framework-or-model.md": ("small_cnn",),
}


@dataclass(frozen=True)
class Block:
    line: int  # of the opening fence
    language: str
    text: str
    not_run: str | None  # the reason, where the page says it is not run


def blocks(page: Path) -> list[Block]:
    """The page's fenced blocks, each with the `not run` reason on the line before it, if any."""
    found, lines = [], page.read_text().splitlines()
    number = 0
    while number < len(lines):
        match = _FENCE.match(lines[number])
        if not match:
            number += 1
            continue
        end = next(i for i in range(number + 1, len(lines)) if lines[i].startswith("```"))
        before = next((lines[i] for i in range(number - 1, -1, -1) if lines[i].strip()), "")
        skip = _SKIP.match(before.strip())
        text = "\n".join(lines[number + 1 : end])
        found.append(Block(number + 1, match.group(1), text, skip.group(1) if skip else None))
        number = end + 1
    return found


def commands(block: Block) -> list[str]:
    """A block's command lines (comments and blank lines aside; a heredoc's body counts once)."""
    return [line for line in block.text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_every_guide_block_is_typed_and_every_block_not_run_says_why():
    problems, not_run, run = [], [], 0
    for page in GUIDES:
        name = page.relative_to(REPO).as_posix()
        page_blocks = blocks(page)
        for block in page_blocks:
            where = f"{name}:{block.line}"
            if block.language not in LANGUAGES:
                problems.append(
                    f"{where}: a block of `{block.language or 'no language'}`: use sh for "
                    "commands, text for output, yaml for a file"
                )
            elif block.not_run is not None:
                if not block.not_run.startswith(NOT_RUN):
                    problems.append(f"{where}: not run for '{block.not_run}', not one of {NOT_RUN}")
                not_run.append(f"{where}: {block.not_run}")
        ran = [b for b in page_blocks if b.language == "sh" and b.not_run is None]
        if not ran:
            problems.append(f"{name}: no command the suite runs")
        run += sum(len(commands(b)) for b in ran)
    assert not problems, "\n".join(problems)
    getting_started = [b for b in blocks(GUIDES[0]) if b.language == "sh" and b.not_run is None]
    assert sum(len(commands(b)) for b in getting_started) >= 8
    print(f"{run} commands run; {len(not_run)} blocks not run:\n" + "\n".join(not_run))


def test_the_block_reader_sees_reasons_languages_and_heredocs(tmp_path: Path):
    page = tmp_path / "p.md"
    page.write_text(
        "# P\n\n```sh\nbench report   # a comment\n# only a comment\n```\n\n"
        "<!-- not run: needs a GPU -->\n```sh\nnvidia-smi\n```\n\n```\nbare\n```\n"
        "```sh\ncat > m.yaml <<'YAML'\nname: m\nYAML\n```\n"
    )
    first, gpu, bare, heredoc = blocks(page)
    assert (first.language, first.not_run, commands(first)) == ("sh", None, ["bench report   # a comment"])
    assert (gpu.line, gpu.not_run) == (9, "needs a GPU")
    assert bare.language == "" and bare.not_run is None
    assert commands(heredoc) == ["cat > m.yaml <<'YAML'", "name: m", "YAML"]


def checkout_like(folder: Path) -> Path:
    """A folder that reads as the checkout, its quick matrix the stand-in; run output lands in it."""
    folder.mkdir()
    for entry in REPO.iterdir():
        if entry.name in {".git", "matrices"} or entry.name.startswith(("bench.db", "bench-runs")):
            continue
        (folder / entry.name).symlink_to(entry)
    (folder / "matrices").mkdir()
    for matrix in (REPO / "matrices").glob("*.yaml"):
        (folder / "matrices" / matrix.name).symlink_to(matrix)
    (folder / "matrices" / "quick.yaml").unlink()
    (folder / "matrices" / "quick.yaml").write_text(QUICK)
    return folder


def script(page: Path) -> str:
    ran = [b.text for b in blocks(page) if b.language == "sh" and b.not_run is None]
    trap = "trap 'echo \"guide command failed (exit $?): $BASH_COMMAND\" >&2' ERR\n"
    return "set -eE -o pipefail\n" + trap + "\n".join(ran) + "\n"


def environment(page: Path, tmp_path: Path) -> dict[str, str]:
    """The suite's environment (its state folder, calibration off), bench on PATH, no BENCH_DB."""
    env = {k: v for k, v in os.environ.items() if k not in {"BENCH_DB", "BENCH_STUDIES", "VIRTUAL_ENV"}}
    path = [str(Path(sys.executable).parent), env.get("PATH", "")]
    if page.name == "bring-your-own-environment.md":
        # The reader has activated an environment that holds the framework: here, bench's own
        # PyTorch environment plays it; the registration goes to an env dir of the test's own,
        # never the shared one.
        path.insert(0, str(framework_python("pytorch").parent))
        env["BENCH_ENV_DIR"] = str(tmp_path / "envs")
    env["PATH"] = os.pathsep.join(path)
    return env


@pytest.mark.slow
@pytest.mark.parametrize(
    "page",
    [pytest.param(p, id=p.name, marks=[pytest.mark.framework] if p.name in NEEDS else []) for p in GUIDES],
)
def test_a_guides_commands_run_as_written(page: Path, tmp_path: Path):
    for framework in NEEDS.get(page.name, ()):
        framework_python(framework)
    if page.name == "compare-two-releases.md":
        env_build.setup("jax", version="0.4.30", echo=lambda line: None)  # as .ci/run makes it, once
    folder = checkout_like(tmp_path / "checkout")
    done = subprocess.run(
        ["bash", "-c", script(page)],
        cwd=folder,
        env=environment(page, tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{page.name}: exit {done.returncode}\n{output[-4000:]}"
    for text in SHOWS.get(page.name, ()):
        assert text in output, f"{page.name}: its commands' output lacks {text!r}\n{output[-4000:]}"
