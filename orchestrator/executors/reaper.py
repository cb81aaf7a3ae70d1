"""Kill a run's process group when the process supervising it dies without doing so itself.

Started by a Ray task (orchestrator/executors/ray_task.py) in a session of its own, with a pipe from the task
as its standard input: ``watch PGID`` and ``done PGID`` lines. When the pipe closes (the task ended,
was cancelled with force, or died with its node), every group still watched gets SIGKILL. A run the
task finished normally was already reaped by orchestrator/launch/process.py and said ``done``.

It detaches itself (a fork whose parent exits), since Ray kills the direct children of a task's
process when that process ends. Run by path with ``python -I -S``: standard library only, nothing
of bench imported, so it starts in milliseconds on any node.
"""

import os
import signal
import sys


def main() -> None:
    # Ray kills a task process's direct children when the process exits: a reaper that Ray could
    # kill would be no reaper. So it forks and the parent exits: the reaper lives on as an orphan.
    if os.fork() > 0:
        os._exit(0)
    groups = set()
    for line in sys.stdin:
        command, _, pgid = line.strip().partition(" ")
        if not pgid.isdigit():
            continue
        if command == "watch":
            groups.add(int(pgid))
        elif command == "done":
            groups.discard(int(pgid))
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass


if __name__ == "__main__":
    main()
