"""The files bench ships beside its code: `schema.sql` and the pinned requirements (`envs/`).

Their one source is the repository's root. A built bench (`pip install .`, `pipx install .`, a
wheel) carries a copy of each in the package, `orchestrator/_data/`, put there by setup.py's build
step and found here with importlib.resources; a checkout (an editable install) has no
`orchestrator/_data/` and reads the root's files themselves.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from orchestrator.errors import BenchError

PACKAGED = "_data"
NAMES = ("schema.sql", "envs")
CHECKOUT = Path(__file__).resolve().parent.parent


def path(name: str) -> Path:
    """Where the shipped file or folder ``name`` (one of NAMES) is: the package's copy, else the
    checkout's."""
    packaged = resources.files("orchestrator").joinpath(PACKAGED, name)
    if isinstance(packaged, Path) and packaged.exists():
        return packaged
    checkout = CHECKOUT / name
    if checkout.exists():
        return checkout
    raise BenchError(f"bench's installation has no {name} (not in {packaged} nor {checkout}); reinstall it")
