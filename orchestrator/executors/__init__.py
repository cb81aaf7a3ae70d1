"""executors: where runs happen, behind one small interface.

    base.py         Job (one configuration and its folder), Executor (yields each job's RunRecord as
                    it ends), ProgressSink (what an executor tells the sweep's progress)
    local.py        one run at a time on this machine (idle.py: --wait-idle first)
    ray_cluster.py  each run one Ray task on a cluster's nodes (docs/distributed.md); ray_task.py is the
                    task's body (a run: launch/execute.py's execute; a data-parallel run's replica, one
                    a node: launch/lifecycle.py's start, watch and end, their endings made the run's
                    record by lifecycle.record_replicas), reaper.py ends a run's processes if the task dies

May import: text, config, provision, launch. Never the database: executors hand records back,
the sweep writes them.
"""
