-- bench results database: the single source of truth for its layout.
-- Bump user_version with every change; bench refuses a database of another version, except an
-- older one that orchestrator/storage/migrate.py knows how to bring up to date (additions, and
-- version 13's fold of the fault worker's ten columns into runs.fault).
PRAGMA user_version = 16;
-- Marks the file as bench's (ASCII 'BNCH'): bench writes no SQLite file without it (docs/schema.md).
PRAGMA application_id = 1112425288;

-- One invocation of `bench run` (or `bench rerun`); --resume continues an existing sweep.
CREATE TABLE sweeps (
    id              INTEGER PRIMARY KEY,
    name            TEXT NOT NULL,
    kind            TEXT NOT NULL DEFAULT 'matrix',      -- matrix | rerun
    matrix_path     TEXT,
    matrix_hash     TEXT,                                -- sha256 of the matrix file's bytes
    started_at      TEXT NOT NULL,                       -- ISO 8601, UTC
    ended_at        TEXT,
    status          TEXT NOT NULL,                       -- running | finished | interrupted
    total_configs   INTEGER NOT NULL,
    host            TEXT NOT NULL,
    machine         TEXT NOT NULL,                       -- fingerprint: cpu model, cores, memory, gpu
    bench_version   TEXT NOT NULL,
    git_commit      TEXT,
    command         TEXT NOT NULL,
    order_seed      INTEGER                              -- version 14: the seed that shuffled the rounds of its runs (runs: N)
);

-- One attempt at one configuration, written the moment it ends.
CREATE TABLE runs (
    id                      INTEGER PRIMARY KEY,
    sweep_id                INTEGER NOT NULL REFERENCES sweeps(id),
    config_hash             TEXT NOT NULL,
    -- every configuration field, one column each (orchestrator/config.py RunConfig)
    framework               TEXT NOT NULL,
    model                   TEXT NOT NULL,
    device                  TEXT NOT NULL,
    batch_size              INTEGER NOT NULL,
    optimizer               TEXT NOT NULL,
    lr                      REAL NOT NULL,
    momentum                REAL NOT NULL,
    epochs                  INTEGER NOT NULL,
    warmup_steps            INTEGER NOT NULL,
    repeats                 INTEGER NOT NULL,
    timeout                 REAL NOT NULL,
    dataset                 TEXT NOT NULL,
    dataset_size            INTEGER NOT NULL,
    data_dir                TEXT,
    image_size              INTEGER NOT NULL,
    classes                 INTEGER NOT NULL,
    val_fraction            REAL NOT NULL,
    threads                 INTEGER NOT NULL,
    seed                    INTEGER NOT NULL,
    fault                   TEXT,                        -- framework fault: its settings, one JSON value
                                                         -- ({"kind": "segfault", "after_steps": 2}; version 13)
    cpus                    TEXT,                        -- CPUs the run may use ("0-1,4"); NULL: all
    memory_budget           INTEGER,                     -- bytes of RSS for the process tree
    gpu_memory_budget       INTEGER,                     -- bytes of device memory (framework's cap)
    sample_interval         REAL,                        -- seconds; NULL: the default; 0: no sampler
    trace                   TEXT,                        -- kernels: traced (timings perturbed); NULL: off
    config_json             TEXT NOT NULL,
    -- the outcome and its evidence
    outcome                 TEXT NOT NULL CHECK (outcome IN ('ok', 'error', 'oom', 'crash', 'timeout',
                                'unsupported', 'unavailable', 'interrupted', 'invalid', 'skipped',
                                'node_lost', 'ray_oom', 'unschedulable', 'cluster_error')),
    reason                  TEXT,
    exit_code               INTEGER,
    signal_number           INTEGER,
    signal_name             TEXT,
    exception_type          TEXT,
    exception_message       TEXT,
    traceback               TEXT,
    stderr_tail             TEXT,
    last_event              TEXT,                        -- JSON of the last event on disk
    last_phase              TEXT,
    last_epoch              INTEGER,
    last_step               INTEGER,
    -- timing of the process and the measured part
    started_at              TEXT NOT NULL,
    ended_at                TEXT NOT NULL,
    wall_seconds            REAL NOT NULL,
    parameter_count         INTEGER,
    steps_per_epoch         INTEGER,
    median_epoch_seconds    REAL,
    min_epoch_seconds       REAL,
    max_epoch_seconds       REAL,
    images_per_second       REAL,                        -- median over timed epochs
    seconds_per_image       REAL,                        -- median over timed epochs
    final_train_loss        REAL,
    final_val_accuracy      REAL,
    -- the sidecar profiler's summary (docs/profiler.md); "steady" means the timed epochs
    samples_count           INTEGER,
    sampler_status          TEXT,                        -- ok | off | missed: ... | failed: ... | died after ...
    sampler_cpu_seconds     REAL,                        -- the sampler's own CPU time
    cpu_allowed             INTEGER,                     -- how many CPUs the run could use
    cpu_percent_mean        REAL,                        -- % of one core, steady mean
    cpu_percent_max         REAL,
    cpu_percent_allowed     REAL,                        -- steady mean as % of the CPUs allowed
    threads_max             INTEGER,
    threads_steady          INTEGER,                     -- most frequent count while steady
    rss_peak_bytes          INTEGER,
    rss_mean_bytes          REAL,                        -- steady mean
    uss_peak_bytes          INTEGER,
    gpu_memory_peak_bytes   INTEGER,
    gpu_util_mean           REAL,                        -- % (NVML), steady mean
    -- kernel and operator tracing (docs/kernels.md), for runs with trace: kernels
    trace_backend           TEXT,                        -- torch.profiler, tf.profiler, cupti, nsys, ...
    trace_status            TEXT,                        -- ok | failed: ... | missing: ...
    trace_seconds           REAL,                        -- the traced region: the timed epochs' seconds
    -- where to look and how to do it again
    run_dir                 TEXT NOT NULL,
    worker_command          TEXT NOT NULL,
    reproduce               TEXT NOT NULL,
    -- GPU energy (version 5; profiler/energy.py): the whole device's, over the timed epochs
    gpu_energy_source       TEXT,                        -- NVML total energy counter | NVML power,
                                                         -- integrated | none: why there is no figure
    gpu_joules_per_epoch    REAL,                        -- median over the timed epochs
    gpu_joules_per_image    REAL,                        -- median over the timed epochs
    -- where it ran (docs/distributed.md)
    executor                TEXT,                        -- local | ray
    node                    TEXT,                        -- ray: the node's address and id; NULL: local
    machine                 TEXT,                        -- fingerprint of the machine that ran it
    packed                  INTEGER,                     -- 1: --pack, shared its node with other runs
    -- memory and workload (version 5)
    swap_peak_bytes         INTEGER,                     -- the tree's VmSwap peak; NULL: no swap on the machine
    task                    TEXT,                        -- configuration: inference; NULL: train
    features                INTEGER,                     -- configuration: 1: pooled features only; NULL: full model
    -- version 6: enough samples (docs/reports.md, "Samples")
    min_time                REAL,                        -- seconds of timing the run aimed at (resolved: bench's
                                                         -- default where the configuration left it unset)
    min_steps               INTEGER,                     -- timed steps the run aimed at (resolved likewise)
    timed_epochs            INTEGER,                     -- timed epochs, extra ones included
    timed_steps             INTEGER,                     -- timed steps over those epochs
    timed_seconds           REAL,                        -- their seconds
    samples_note            TEXT,                        -- why the run had fewer than it aimed at; NULL: it had enough
    -- version 6: disturbance (profiler/disturbance.py), over the timed epochs
    other_cpu_percent_mean  REAL,                        -- CPU of everything but bench on the allowed
                                                         -- CPUs, % of their capacity
    steal_percent_mean      REAL,                        -- hypervisor steal, % of that capacity
    disturbed               INTEGER,                     -- 1: past a threshold; 0: quiet; NULL: unknown
    disturbance             TEXT,                        -- why it is flagged
    -- version 7: execution modes and precision (workers/execution.py, docs/fairness.md)
    mode                    TEXT,                        -- configuration: eager | graph | compiled; NULL: the framework's default
    precision               TEXT,                        -- configuration: bf16 | fp16 | tf32; NULL: fp32
    compile_mode            TEXT,                        -- configuration: torch.compile's mode (PyTorch)
    target_accuracy         REAL,                        -- configuration: time to accuracy's target
    stop_at_target          INTEGER,                     -- configuration: 1: each repeat ends at the target
    resolved_mode           TEXT,                        -- the mode that ran (the default resolved)
    resolved_precision      TEXT,                        -- the precision that ran
    execution               TEXT,                        -- JSON: how (the framework's calls and settings)
    compile_seconds         REAL,                        -- warm-up time above what as many steady steps take
    first_step_seconds      REAL,                        -- the first warm-up step, compilation included
    warmup_steps_run        INTEGER,                     -- warm-up steps run until steady (or the bound)
    steady_by               TEXT,                        -- how the run knows it was steady
    first_step_loss         REAL,                        -- the first training step's loss
    target_reached          INTEGER,                     -- 1: every repeat reached target_accuracy; 0: not; NULL: no target
    target_seconds          REAL,                        -- training + evaluation wall seconds to the target (median of repeats)
    target_epoch            INTEGER,                     -- the epoch that reached it (first repeat)
    -- version 8: attention models
    sequence_length         INTEGER,                     -- configuration: a language model's tokens per sequence; NULL: its context
    tokens_per_second       REAL,                        -- token models: images_per_second x tokens per sequence
    -- version 9: data-parallel replicas (docs/distributed.md); every figure above is the run's,
    -- all replicas together (images_per_second counts the global batch), timed by replica 0
    replicas                INTEGER,                     -- configuration: processes; NULL: one
    global_batch            INTEGER,                     -- batch_size x replicas: samples per optimizer step
    -- version 10: the compile figure's own disturbance (profiler/disturbance.py), over the warm-up
    compile_other_cpu_percent REAL,                      -- other load during the warm-up, % of the allowed CPUs
    compile_load_seconds    REAL,                        -- seconds of compile_seconds that load may account for
    compile_disturbed       INTEGER,                     -- 1: compile_seconds not trustworthy; 0: quiet; NULL: unknown
    -- version 14: independent runs of a configuration (docs/reports.md, "Statistics over runs")
    planned_runs            INTEGER,                     -- configuration `runs`: the runs it asked for; NULL: 1
    run_index               INTEGER,                     -- which of them this row is, from 0; NULL: 0
    -- version 15: framework releases as an axis (docs/frameworks.md, "Framework versions")
    version                 TEXT,                        -- configuration `version`: the release asked for; NULL: the pinned one
    -- version 16: the run folder's record.json this row was imported from (docs/outcomes.md, "The run folder is the first record")
    record_id               TEXT                         -- its unique id (32 hex digits): a second import of it adds nothing; NULL: stored before records
);
CREATE INDEX runs_sweep ON runs (sweep_id, config_hash);
CREATE UNIQUE INDEX runs_record ON runs (record_id);

-- Per timed epoch of a run (for each repeat), from the worker's event stream.
CREATE TABLE epochs (
    run_id              INTEGER NOT NULL REFERENCES runs(id),
    repeat              INTEGER NOT NULL,
    epoch               INTEGER NOT NULL,
    seconds             REAL NOT NULL,
    steps               INTEGER NOT NULL,
    images              INTEGER NOT NULL,
    images_per_second   REAL,
    seconds_per_image   REAL,
    train_loss          REAL,
    val_loss            REAL,
    val_accuracy        REAL,
    os_threads          INTEGER,                         -- the worker's OS threads after the epoch
    minor_faults        INTEGER,                         -- minor page faults during the timed epoch
    gpu_joules          REAL,                            -- GPU energy of the epoch (NULL: no figure)
    -- version 6: enough samples
    extra               INTEGER,                         -- 1: added for min_time/min_steps (not evaluated)
    -- version 7: time to accuracy
    wall_seconds        REAL,                            -- since the repeat began: its training and evaluation so far
    PRIMARY KEY (run_id, repeat, epoch)
);

-- Each replica of a data-parallel run (version 9): its own process, outcome and evidence.
CREATE TABLE replicas (
    run_id              INTEGER NOT NULL REFERENCES runs(id),
    replica             INTEGER NOT NULL,                -- 0 .. replicas - 1 (its rank)
    node                TEXT,                            -- the Ray node that ran it; NULL: this machine
    cpus                TEXT,                            -- the CPUs it was pinned to
    threads             INTEGER,                         -- the threads it was given
    pid                 INTEGER,
    outcome             TEXT NOT NULL,                   -- as runs.outcome, or stopped (ended by bench: another replica failed)
    reason              TEXT,
    ended_by            INTEGER,                         -- stopped: the replica whose failure ended it
    exit_code           INTEGER,
    signal_name         TEXT,
    wall_seconds        REAL,                            -- from the run's start to this replica's end
    median_epoch_seconds REAL,                           -- its own timed epochs
    images_per_second   REAL,                            -- its own share: its batch over its epoch seconds
    cpu_percent_mean    REAL,                            -- its process tree, steady state (its own sampler)
    rss_peak_bytes      INTEGER,
    threads_max         INTEGER,
    other_cpu_percent_mean REAL,                         -- other load on its CPUs
    run_folder          TEXT,                            -- relative to the run's folder ("." for replica 0)
    stderr_tail         TEXT,
    PRIMARY KEY (run_id, replica)
);

-- What each run ran on and with.
CREATE TABLE environments (
    run_id              INTEGER PRIMARY KEY REFERENCES runs(id),
    framework_version   TEXT,
    python_version      TEXT,
    python_executable   TEXT,
    platform            TEXT,
    hostname            TEXT,
    cpu_model           TEXT,
    cpu_count           INTEGER,
    memory_bytes        INTEGER,
    gpu_name            TEXT,
    gpu_driver          TEXT,
    cuda_version        TEXT,
    thread_env          TEXT,                            -- JSON: OMP_NUM_THREADS and friends as set
    threads_applied     TEXT,                            -- JSON: what the adapter applied and saw
    bench_commit        TEXT,
    extra               TEXT,                            -- JSON: anything else the worker reported
    cpu_flags           TEXT                             -- JSON list: the CPU's kernel-choosing features (version 12); NULL unknown
);

-- The sidecar profiler's samples, as taken (elapsed seconds since the worker started).
CREATE TABLE samples (
    run_id              INTEGER NOT NULL REFERENCES runs(id),
    seq                 INTEGER NOT NULL,
    t                   REAL NOT NULL,
    phase               TEXT,                            -- the worker's phase when taken
    repeat              INTEGER,
    epoch               INTEGER,
    cpu_percent         REAL,                            -- % of one core since the previous sample
    cpu_percent_allowed REAL,                            -- the same, as % of the CPUs allowed
    threads             INTEGER,                         -- OS threads over the process tree
    processes           INTEGER,
    rss_bytes           INTEGER,
    uss_bytes           INTEGER,                         -- every 5 s, and when RSS grew 10%; else NULL
    gpu_memory_bytes    INTEGER,                         -- NULL without NVML
    gpu_util            REAL,
    final               INTEGER NOT NULL DEFAULT 0,      -- 1: taken as the worker exited
    gpu_energy_joules   REAL,                            -- the run's GPUs' energy counter since first
                                                         -- seen, J (NULL: no counter)
    gpu_power_watts     REAL,                            -- the run's GPUs' power draw, W (NVML)
    swap_bytes          INTEGER,                         -- the tree's VmSwap; NULL: the machine has no swap
    -- version 6: disturbance
    other_cpu_percent   REAL,                            -- everything but bench on the allowed CPUs,
                                                         -- % of their capacity, since the previous sample
    steal_percent       REAL,                            -- hypervisor steal, % of that capacity
    PRIMARY KEY (run_id, seq)
);

-- Per phase of a run (each epoch and its evaluation apart): the resource summary of its samples.
CREATE TABLE phases (
    run_id                  INTEGER NOT NULL REFERENCES runs(id),
    seq                     INTEGER NOT NULL,
    phase                   TEXT NOT NULL,
    repeat                  INTEGER,
    epoch                   INTEGER,
    samples                 INTEGER NOT NULL,
    first_t                 REAL,
    last_t                  REAL,
    cpu_percent_mean        REAL,
    cpu_percent_max         REAL,
    cpu_percent_allowed     REAL,
    threads_max             INTEGER,
    rss_mean_bytes          REAL,
    rss_peak_bytes          INTEGER,
    gpu_memory_peak_bytes   INTEGER,
    -- version 6: disturbance
    other_cpu_percent_mean  REAL,                        -- as runs.other_cpu_percent_mean, this phase's
    PRIMARY KEY (run_id, seq)
);

-- Per kernel (GPU) or operator (CPU) name of a traced run, summed over its timed epochs.
CREATE TABLE kernels (
    run_id              INTEGER NOT NULL REFERENCES runs(id),
    seq                 INTEGER NOT NULL,                -- 0: the most time
    backend             TEXT NOT NULL,                   -- what recorded it (runs.trace_backend)
    device              TEXT NOT NULL,                   -- cpu | cuda
    name                TEXT NOT NULL,                   -- as the backend reported it
    class               TEXT NOT NULL,                   -- profiler/kernels.py: gemm, batched gemm, ...
    tile                TEXT,                            -- tile shape where the name carries one
    calls               INTEGER NOT NULL,
    total_seconds       REAL NOT NULL,                   -- self time (CPU operators), device time (kernels)
    share               REAL,                            -- of the run's summed kernel/operator time
    PRIMARY KEY (run_id, seq)
);

-- The same fixed work timed at the start and end of each session of a sweep (version 11;
-- profiler/calibration.py): two sweeps, or the two ends of one, say whether the machine ran at the
-- same speed. One thread, each figure the best of its timings; NULL figures with an error.
CREATE TABLE calibrations (
    id                  INTEGER PRIMARY KEY,
    sweep_id            INTEGER NOT NULL REFERENCES sweeps(id),
    at                  TEXT NOT NULL,                   -- start | end (of this session of the sweep)
    taken_at            TEXT NOT NULL,                   -- ISO 8601, UTC
    machine             TEXT,                            -- fingerprint of the machine that took it
    python_mops         REAL,                            -- millions of pure-Python loop iterations a second
    matmul_gflops       REAL,                            -- float32 matrix product, numpy, one thread
    memory_gbps         REAL,                            -- 64 MiB array copy, read and write counted
    python_spread       REAL,                            -- (max - min) / median of each figure's timings
    matmul_spread       REAL,
    memory_spread       REAL,
    seconds             REAL,                            -- how long the calibration took
    other_cpu_percent   REAL,                            -- other load meanwhile, % of the CPUs (profiler/disturbance.py)
    error               TEXT                             -- why there are no figures
);
CREATE INDEX calibrations_sweep ON calibrations (sweep_id);
