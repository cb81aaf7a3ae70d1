"""provision: what a run needs before it starts: its framework environment, its data, the machine.

    envs.py          one virtual environment per framework, from pinned requirements, and one per
                     other release a matrix's `version` names (<framework>@<version>): where each is
    env_build.py     making one (bench env setup: a venv, pip installing its pin set), removing one
                     (bench env remove), and the disk each takes
    external_env.py  an interpreter the user already has, checked before it is used (bench env use)
    short_run.py     a short outside program run with bounded output and a deadline
    datasets.py      real datasets decoded and resized once into a cached array file; datafiles/
                     reads CIFAR pickles, .npz and image folders as hostile input (docs/datasets.md)
    digits.py        the real digits scikit-learn ships in its wheel, found and read without it
    worker_tree.py   the copy of bench's workers package that a worker's PYTHONPATH names, alone
    hostinfo.py      facts about the machine and a fingerprint that keeps machines apart in reports

May import: text, config. Starting a worker is launch's part: `bench env use` hands its check in.
"""
