"""The one build step pyproject.toml cannot declare: a built bench carries the repository root's
schema.sql and envs/*.txt (the database's layout and the pinned requirements) in its package, as
orchestrator/_data/, where orchestrator/shipped.py finds them with importlib.resources. The root
stays their one source; nothing is copied into the source tree."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildWithData(build_py):
    def run(self):
        super().run()
        target = Path(self.build_lib) / "orchestrator" / "_data"
        shutil.rmtree(target, ignore_errors=True)
        (target / "envs").mkdir(parents=True)
        shutil.copy2(ROOT / "schema.sql", target / "schema.sql")
        for pins in sorted((ROOT / "envs").glob("*.txt")):
            shutil.copy2(pins, target / "envs" / pins.name)


setup(cmdclass={"build_py": BuildWithData})
