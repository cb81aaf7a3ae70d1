"""The shared runner: every framework is warmed up, timed and observed by this same code.

Clocks are read only after the adapter has synchronised its device, and everything that is not
the training step itself (batch arrangement, evaluation, loss read-out) stays outside the clocks.
"""

import random
import time

from workers import coordination, execution, nvtx, trace, warmup


def epoch_order(seed, epoch, size):
    """The training-set order of one epoch: the same in every framework for a given seed."""
    order = list(range(size))
    random.Random(seed * 1000003 + epoch).shuffle(order)
    return order


def replica_of(config):
    """(rank, count) of a data-parallel run's replica; (0, 1) for a run of one process."""
    replica = config.get("replica") or {}
    return replica.get("rank", 0), replica.get("count", 1)


def shard(order, batch, rank, count):
    """This replica's part of an epoch's order: of each global batch (``count`` x ``batch``
    samples, in the order's sequence), the rank-th slice of ``batch``; a partial global batch is
    dropped, as a partial batch is. With one replica, the order itself."""
    if count == 1:
        return order
    size = batch * count
    steps = len(order) // size
    return [i for s in range(steps) for i in order[s * size + rank * batch: s * size + (rank + 1) * batch]]


def _order(config, epoch, size):
    """The epoch's order as this replica trains it."""
    rank, count = replica_of(config)
    return shard(epoch_order(config["seed"], epoch, size), config["batch_size"], rank, count)


def os_threads():
    """The process's OS thread count as the kernel sees it (Linux), else None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except (IOError, ValueError):
        pass
    return None


def minor_faults():
    """Minor page faults of this process so far (None where the platform has no getrusage).

    Recorded per epoch because an allocator that returns memory to the kernel makes every step
    fault its activations back in, which moves step times by several percent (docs/performance.md).
    """
    try:
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    except (ImportError, AttributeError):
        return None


def _alone(value):
    return value


def _warmup(adapter, config, events, train_size, marks, decide=_alone):
    """Untimed steps until the run is steady (workers/warmup.py); the result's "warmup" object and
    the first training step's loss (read after step 1: it is untimed, and nothing else sees it)."""
    if not config["warmup_steps"]:
        return warmup.none(), None
    # An adapter that measures nothing (the fault worker) runs exactly warmup_steps steps.
    state = warmup.Warmup(config["warmup_steps"], config.get("timeout"),
                          getattr(adapter, "steady_warmup", True))
    # The phase begins before the first epoch is prepared: an adapter that compiles its step ahead
    # of time there (JAX) compiles inside the warm-up, where the sampler judges the compile figure.
    events.set_phase("warmup", steps=config["warmup_steps"], most=state.most)
    steps = adapter.prepare_epoch(_order(config, 0, train_size))
    marks.push("warmup")
    step = _step_function(adapter, config)
    training = config.get("task") != "inference"
    first_loss = None
    while decide(state.more()):  # a data-parallel run's replicas go on as replica 0 says
        i = len(state.seconds)
        start = time.perf_counter()
        step(i % steps)
        adapter.synchronize()
        state.add(time.perf_counter() - start)
        events.step(0, i + 1)
        if i == 0 and training:
            first_loss = adapter.epoch_loss()  # reads and clears the loss sum: the first step's
    marks.pop()
    summary = state.summary()
    ahead = getattr(adapter, "ahead_of_time_seconds", 0.0)
    if ahead:  # compiled before the first step (JAX): part of the time to steady all the same
        summary["ahead_of_time_seconds"] = ahead
        summary["compile_seconds"] += ahead
    # For a run that fails later: bench stores the warm-up's figures from this event.
    events.emit("steady", first_step_loss=first_loss,
                **{k: v for k, v in summary.items() if k != "step_seconds"})
    return summary, first_loss


def _step_function(adapter, config):
    """What one step is: an optimizer step, or (task inference) a forward pass in evaluation mode
    without gradients."""
    return adapter.infer_step if config.get("task") == "inference" else adapter.train_step


def _steps(step, events, epoch, steps, marks):
    """The timed loop; with NVTX (cuda runs) each step is a range of its own."""
    if not marks.active:
        for i in range(steps):
            step(i)
            events.step(epoch, i + 1)
        return
    for i in range(steps):
        marks.push("step {}".format(i + 1))
        step(i)
        events.step(epoch, i + 1)
        marks.pop()


def _epoch(adapter, config, events, train_size, repeat, epoch, session=None, marks=nvtx.NoMarks(),
           extra=False, began=None):
    """Run and time one epoch; return its record (seconds exclude evaluation).

    A traced run's tracer starts after the device is synchronised and stops after the clock: it
    sees exactly the timed steps, never warm-up, batch arrangement or evaluation. An extra epoch
    (added for min_time or min_steps) is timed alike but not evaluated: it is a timing sample, and
    its accuracy would not belong to the configured epochs' curve. ``began``: when the repeat's
    clock started (after its reset), for the record's wall_seconds: its training and evaluation so
    far, batch arrangement included, as time to accuracy counts it.
    """
    steps = adapter.prepare_epoch(_order(config, epoch, train_size))
    events.set_phase("epoch", epoch=epoch, repeat=repeat, steps=steps)
    adapter.synchronize()
    faults = minor_faults()
    if session is not None:
        session.start()
    marks.push("epoch {}".format(epoch))
    start = time.perf_counter()
    _steps(_step_function(adapter, config), events, epoch, steps, marks)
    adapter.synchronize()
    seconds = time.perf_counter() - start
    marks.pop()
    if session is not None:
        session.stop(seconds)
    if faults is not None:
        faults = minor_faults() - faults
    train_loss = val_loss = val_accuracy = None
    if config.get("task") != "inference":  # inference trains nothing: no loss, nothing to evaluate
        train_loss = adapter.epoch_loss()
    if config.get("task") != "inference" and not extra:
        events.set_phase("eval", epoch=epoch, repeat=repeat)
        val_loss, val_accuracy = adapter.evaluate()
    # Every replica's samples (the global batch): the replicas step together, so one replica's
    # clock times them all; replica_images is this replica's own share.
    images = steps * config["batch_size"] * replica_of(config)[1]
    record = {
        "repeat": repeat,
        "epoch": epoch,
        "seconds": seconds,
        "steps": steps,
        "images": images,
        "images_per_second": images / seconds if seconds > 0 else None,
        "seconds_per_image": seconds / images if images else None,
        "seconds_per_1000_images": 1000.0 * seconds / images if images else None,
        "train_loss": train_loss,
        "val_loss": val_loss,
        "val_accuracy": val_accuracy,
        "os_threads": os_threads(),
        "minor_faults": faults,
        "extra": 1 if extra else 0,
        "wall_seconds": time.perf_counter() - began if began is not None else None,
    }
    if replica_of(config)[1] > 1:
        record["replica_images"] = steps * config["batch_size"]
    events.emit("epoch_end", **record)
    return record


def check_gpu_memory_budget(config):
    from workers.adapters.base import Unsupported
    if config.get("gpu_memory_budget") and config.get("device") != "cuda":
        raise Unsupported("gpu_memory_budget caps device memory; it does not apply to device {}".format(
            config.get("device")))
    refusal = execution.device_refusal(config)  # tf32 off a GPU, whatever the framework
    if refusal:
        raise Unsupported(refusal)


# Extra epochs stop at this many per run, and once the run's time so far plus two more epochs would
# pass this share of its timeout: the rest is the margin for trace read-out, result and exit.
MAX_EXTRA_EPOCHS = 1000
TIMEOUT_SHARE = 0.7


def extra_epochs(config, records, more, per_epoch, started, stopped_at_target=False, decide=_alone):
    """Add timed epochs (``more(epoch)`` runs one) until the run has min_time seconds and
    min_steps steps of timing; return None, or what stopped it short.

    They continue the last repeat, numbered after its configured epochs (each in the order its
    number gives, as a configured epoch would be), so that every sample times the same work. A
    last repeat that stop_at_target ended gets none: it would train on past its target. In a
    data-parallel run replica 0's timings decide for every replica (``decide``).
    """
    epoch = config["epochs"]
    while True:
        step = decide(_next_extra(config, records, per_epoch, started, stopped_at_target, epoch))
        if step != "go":
            return step  # None: enough samples; else what stopped them short
        epoch += 1
        records.append(more(epoch))


def _next_extra(config, records, per_epoch, started, stopped_at_target, epoch):
    """None when the samples are enough, "go" for one more extra epoch, else why not."""
    if (sum(r["seconds"] for r in records) >= (config.get("min_time") or 0)
            and sum(r["steps"] for r in records) >= (config.get("min_steps") or 1)):
        return None
    if stopped_at_target:
        return "stop_at_target (the last repeat ended at its target: no extra epochs)"
    if epoch - config["epochs"] >= MAX_EXTRA_EPOCHS:
        return "the bound of {} extra epochs".format(MAX_EXTRA_EPOCHS)
    if time.perf_counter() - started + 2 * per_epoch > TIMEOUT_SHARE * config["timeout"]:
        return "the run's timeout ({:g} s)".format(config["timeout"])
    return "go"


def _reached(config, record):
    target = config.get("target_accuracy")
    accuracy = record.get("val_accuracy")
    return target is not None and accuracy is not None and accuracy >= target


def _repeat(adapter, config, events, train_size, session, marks, repeat, records, decide=_alone):
    """One repeat's configured epochs (to its target, with stop_at_target); its target record and
    when its clock began."""
    # Warm-up and earlier repeats changed the weights: every timed repeat starts from the
    # same initial state, so accuracy per epoch is comparable across repeats and frameworks.
    events.set_phase("reset", repeat=repeat)
    adapter.reset()
    began = time.perf_counter()
    hit = {"repeat": repeat, "reached": False, "epoch": None, "seconds": None}
    for epoch in range(1, config["epochs"] + 1):
        record = _epoch(adapter, config, events, train_size, repeat, epoch, session, marks, began=began)
        records.append(record)
        if not hit["reached"] and decide(_reached(config, record)):  # the first epoch that reaches it
            hit.update(reached=True, epoch=epoch, seconds=record["wall_seconds"])
            events.emit("target", **hit)
            if config.get("stop_at_target"):
                break
    return hit, began


def _timed(adapter, config, events, train_size, session, marks, started, decide=_alone):
    """Every repeat's configured epochs, then the extra ones; the records, what stopped them, and
    the time to target of each repeat."""
    records = []
    hits = []
    timed_from = time.perf_counter()
    for repeat in range(config["repeats"]):
        hit, began = _repeat(adapter, config, events, train_size, session, marks, repeat, records, decide)
        hits.append(hit)
    per_epoch = (time.perf_counter() - timed_from) / len(records)

    def more(epoch):
        return _epoch(adapter, config, events, train_size, config["repeats"] - 1, epoch, session, marks,
                      extra=True, began=began)

    stopped = hits[-1]["reached"] and bool(config.get("stop_at_target"))
    return records, extra_epochs(config, records, more, per_epoch, started, stopped, decide), hits


def target_summary(config, hits):
    """The result's "target" object (None without target_accuracy): reached only where every
    repeat reached it; seconds the median of the repeats' (where all reached), epoch the first's."""
    if config.get("target_accuracy") is None:
        return None
    reached = all(h["reached"] for h in hits)
    median = warmup.median([h["seconds"] for h in hits]) if reached else None
    return {"accuracy": config["target_accuracy"], "stop": bool(config.get("stop_at_target")),
            "repeats": hits, "reached": reached, "seconds": median, "epoch": hits[0]["epoch"]}


def run(adapter, config, events):
    """Run one configuration; return the result fields (status ok)."""
    started = time.perf_counter()
    check_gpu_memory_budget(config)
    # Before setup: a framework without a profiler is unsupported before anything runs, and a
    # tracer that must configure its framework before the import can.
    session = trace.session_for(adapter, config)
    events.set_phase("import")
    info = adapter.setup()
    events.emit("setup", **info)
    # After setup: PyTorch's NVTX fallback imports torch, which must come after the adapter has
    # set the thread variables that torch reads at its import.
    marks = nvtx.marks_for(config)
    channel = coordination.Alone()
    if replica_of(config)[1] > 1:
        events.set_phase("join")
        channel = coordination.channel_for(config)  # bench's own, for replica 0's decisions
        adapter.join_replicas(config["replica"])
        events.emit("joined", rank=replica_of(config)[0], count=replica_of(config)[1])
    events.set_phase("build")
    parameters = adapter.build_model()
    events.emit("built", parameter_count=parameters)
    events.set_phase("data")
    train_size, val_size = adapter.load_data()
    events.emit("data", train_size=train_size, val_size=val_size)
    warm, first_loss = _warmup(adapter, config, events, train_size, marks, channel.decide)
    records, stopped, hits = _timed(adapter, config, events, train_size, session, marks, started,
                                    channel.decide)
    channel.close()
    result = {
        "status": "ok",
        "samples_stopped_by": stopped,
        "info": info,
        "parameter_count": parameters,
        "train_size": train_size,
        "val_size": val_size,
        "epochs": records,
        "execution": adapter.execution_info(),
        "warmup": warm,
        "first_step_loss": first_loss,
        "target": target_summary(config, hits),
    }
    memory = adapter.device_memory()
    if memory is not None:
        result["device_memory"] = memory
    if session is not None:
        events.set_phase("trace")
        result["trace"] = session.finish()
        events.emit("trace", backend=result["trace"]["backend"], status=result["trace"]["status"],
                    records=len(result["trace"]["records"]))
    return result


def probe(adapter, config, events):
    """Build the model for real and run one forward pass: parameter count and output shape."""
    events.set_phase("import")
    info = adapter.setup()
    events.emit("setup", **info)
    events.set_phase("build")
    parameters = adapter.build_model()
    events.emit("built", parameter_count=parameters)
    events.set_phase("forward")
    try:
        shape = list(adapter.forward_shape(2))
    except NotImplementedError:
        shape = None
    return {"status": "ok", "task": "probe", "info": info, "parameter_count": parameters,
            "output_shape": shape, "execution": adapter.execution_info()}
