"""The fault worker: the project's one deliberate fake, a framework that fails on command.

It exists to drive every outcome through the real orchestrator, process boundary and worker core.
A fault strikes during setup, or, with ``after_steps: N``, at the start of training step N + 1
(warm-up steps count), so it can hit mid-epoch. Its warm-up is exactly ``warmup_steps`` steps (it
does not wait for a steady state: its steps are a token of work, and a fault must strike where the
tests say). ``learn`` is an ok run with a learning curve fixed in advance (the loss halves and the
error falls by half each epoch since reset), so first_step_loss and time to accuracy reach the
database without a framework; ``hostile_result`` writes an ok result whose execution, warm-up and
target fields are garbage of every kind, as a broken worker might.
"""

import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time

from workers.adapters import base

# Address-space headroom the oom fault allows itself beyond what it already maps: it hits its own
# limit long before the machine's, so the machine is never at risk.
OOM_HEADROOM = 512 * 1024 * 1024
OOM_CHUNK = 16 * 1024 * 1024


def _segfault():
    ctypes.string_at(0)


def _oom():
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as f:
        mapped = int(f.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (mapped + OOM_HEADROOM, hard))
    hoard = []
    try:
        while True:
            hoard.append(bytearray(OOM_CHUNK))
    except MemoryError:
        got = len(hoard) * OOM_CHUNK // (1024 * 1024)
        del hoard[:]
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    raise MemoryError("fault worker: allocation failed after %d MiB (address space capped)" % got)


PAGE = 4096
# The child of `hold`: allocates and touches its share, says so, and holds it.
HOLD_CHILD = (
    "import sys, time\n"
    "n = int(sys.argv[1]) << 20\n"
    "b = bytearray(n)\n"
    "b[::4096] = b'\\x01' * len(range(0, n, 4096))\n"
    "print('ready', flush=True)\n"
    "time.sleep(float(sys.argv[2]))\n"
)


def _touched(megabytes):
    """That many MiB, every page written, so all of it is resident (a bare bytearray is not)."""
    size = megabytes << 20
    buf = bytearray(size)
    buf[::PAGE] = b"\x01" * len(range(0, size, PAGE))
    return buf


def _hold(config, events):
    """Hold threads and memory (in this process and, optionally, a child) for a while."""
    seconds = config.get("hold_seconds") or 0.0
    if events is not None:
        events.set_phase("hold")
    stop = threading.Event()
    pool = [threading.Thread(target=stop.wait) for _ in range(config.get("hold_threads") or 0)]
    for thread in pool:
        thread.start()
    memory = _touched(config.get("hold_memory_mb") or 0)
    child = None
    if config.get("hold_child_memory_mb"):
        child = subprocess.Popen(
            [sys.executable, "-c", HOLD_CHILD, str(config["hold_child_memory_mb"]), str(seconds + 60)],
            stdout=subprocess.PIPE,
        )
        child.stdout.readline()  # its memory is touched
    if events is not None:
        events.emit("held", threads=len(pool), memory_mb=len(memory) >> 20,
                    child_pid=child.pid if child else None)
    time.sleep(seconds)
    stop.set()
    for thread in pool:
        thread.join()
    if child is not None:
        child.kill()
        child.wait()
    del memory


def _hang(config, events):
    if config.get("ignore_sigterm"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # A child that hangs too, as a framework's data-loader process would: the orchestrator must
    # kill the whole process group, not only the worker.
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    if events is not None:
        events.emit("child", pid=child.pid)
    while True:
        time.sleep(3600)


# What `hostile` puts in every field it can reach: sequences a terminal obeys (OSC 0 sets the
# window title, OSC 8 writes a hyperlink, CSI 2J clears the screen, BEL), their 8-bit C1 forms,
# the Unicode that reorders or hides text (a bidi override, a zero-width space, U+2028), markup
# (HTML, a markdown pipe) and a formula matplotlib cannot parse ($\oops$).
HOSTILE = (
    "\x1b]0;pwned\x07"
    "\x1b]8;;https://example.invalid/\x1b\\click\x1b]8;;\x1b\\"
    "\x1b[2J\x07"
    "\x9b2J\x9d0;pwned\x9c"
    "\u202egnp.exe\u200b\u2028<img src=x>|$\\oops$end"
)


def _hostile(config, events):
    """Outside text as a broken framework might leave it: in a phase name, stdout, stderr (a line
    that reads as running out of memory) and the exception's type and message; then exit with
    ``exit_code`` (no result: the orchestrator quotes stderr), or raise."""
    if events is not None:
        events.set_phase("hostile " + HOSTILE)
    sys.stdout.write("stdout " + HOSTILE + "\n")
    sys.stdout.flush()
    sys.stderr.write("stderr " + HOSTILE + "\nfault worker: out of memory " + HOSTILE + "\n")
    sys.stderr.flush()
    if config.get("exit_code") is not None:
        os._exit(config["exit_code"])
    error = type("Hostile" + HOSTILE + "Error", (MemoryError,), {})
    raise error("raised " + HOSTILE + "\n  outcome: ok")


# A process that outlives its worker as a daemonized helper would: it ignores TERM and HUP, says
# so, and sleeps.
STUBBORN = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(3600)\n"
)


def _stubborn(new_session):
    child = subprocess.Popen([sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE,
                             start_new_session=new_session)
    child.stdout.readline()
    return child.pid


def _orphans(events):
    """Leave two stubborn children, one in the worker's process group and one in a session of its
    own (out of reach of a group kill), name them in children.txt and an event, and hang."""
    group, session = _stubborn(False), _stubborn(True)
    with open("children.txt", "w") as f:
        f.write("%d\n%d\n" % (group, session))
    if events is not None:
        events.emit("children", group=group, session=session)
    while True:
        time.sleep(3600)


def _flood(config):
    """Write hold_memory_mb MiB (40 without it) to stdout and to stderr, then segfault."""
    megabytes = config.get("hold_memory_mb") or 40
    line = b"fault worker: flooding the stream on purpose, line after line after line\n"
    block = line * (65536 // len(line))
    for stream in (sys.stdout.buffer, sys.stderr.buffer):
        for _ in range((megabytes << 20) // len(block)):
            stream.write(block)
        stream.flush()
    _segfault()


def _hostile_result(result_path):
    """An ok result with one good epoch, and garbage in every field of execution, warm-up and time
    to target: wrong types, text that a terminal obeys, numbers out of range, a deep nest."""
    nest = []
    for _ in range(200):
        nest = [nest]
    text = HOSTILE * 2000  # about 150 KB
    result = {
        "status": "ok",
        "epochs": [{"repeat": 0, "epoch": 1, "seconds": 0.5, "steps": 4, "images": 32,
                    "wall_seconds": 0.75}],
        "execution": {"mode": HOSTILE, "precision": 16, "mode_default": "maybe", "how": text,
                      "compute_dtypes": {HOSTILE: nest}},
        "warmup": {"steps": "many", "steady_by": text, "compile_seconds": "Infinity",
                   "first_step_seconds": -5, "step_seconds": [HOSTILE], "steady": HOSTILE},
        "first_step_loss": "NaN",
        "target": {"reached": "yes", "seconds": [1.0], "epoch": 1e300, "accuracy": HOSTILE},
    }
    with open(result_path, "w") as f:
        f.write(json.dumps(result).replace('"Infinity"', "Infinity"))
    os._exit(0)


class _Collective(object):
    """A data-parallel run's gradient exchange, as small as it can be: replica 0 listens on the
    rendezvous address, the others connect; each step every replica sends one byte to replica 0,
    which answers each once all have sent. A replica that hangs makes the others wait (the run times
    out); one that dies makes replica 0 fail on the closed connection, as a framework's would."""

    def __init__(self, rank, count, address):
        import socket
        host, port = address.rsplit(":", 1)
        self.rank = rank
        if rank == 0:
            server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            server.bind((host, int(port)))  # EADDRINUSE here if another took the port
            server.listen(count)
            self.peers = [server.accept()[0] for _ in range(count - 1)]
            server.close()
        else:
            deadline = time.time() + 60
            while True:
                try:
                    self.peers = [socket.create_connection((host, int(port)), timeout=5)]
                    break
                except OSError:
                    if time.time() > deadline:
                        raise
                    time.sleep(0.05)
            self.peers[0].settimeout(None)

    def _take(self, peer):
        if not peer.recv(1):
            raise ConnectionError("fault worker: a replica closed the collective's connection")

    def all_reduce(self):
        if self.rank == 0:
            for peer in self.peers:
                self._take(peer)
            for peer in self.peers:
                peer.sendall(b"r")
        else:
            self.peers[0].sendall(b"s")
            self._take(self.peers[0])


class _Tracer(base.Tracer):
    """Made-up records in a fixed proportion of the traced time, so the tracing path (result,
    database, reports) can be tested without a framework; the backend's name says so."""

    backend = "fault (synthetic)"
    SPLIT = (("aten::mkldnn_convolution", 0.5), ("volta_sgemm_128x64_nn", 0.2),
             ("maxwell_sgemmBatched_128x128_raggedMn_tn", 0.1), ("aten::relu_", 0.2))

    # A data-parallel run's replicas exchange their gradients: a tenth of the time, out of relu's.
    EXCHANGE = (("aten::mkldnn_convolution", 0.5), ("volta_sgemm_128x64_nn", 0.2),
                ("maxwell_sgemmBatched_128x128_raggedMn_tn", 0.1), ("aten::relu_", 0.1),
                ("gloo:all_reduce", 0.1))

    def __init__(self, replicated=False):
        base.Tracer.__init__(self)
        self._start = None
        self.split = self.EXCHANGE if replicated else self.SPLIT

    def start(self):
        self._start = time.perf_counter()

    def stop(self):
        seconds = time.perf_counter() - self._start
        for name, part in self.split:
            self.add(name, 1, seconds * part)


class Adapter(base.Adapter):
    name = "fault"
    title = "the fault worker"
    steady_warmup = False  # exactly warmup_steps warm-up steps: see the module's docstring
    result_path = None  # set by workers.__main__ so `garbage` can spoil it
    events = None  # likewise, so `hang` can report its child

    def __init__(self, config):
        base.Adapter.__init__(self, config)
        self.fault = config.get("fault") or "ok"
        replica = config.get("replica") or {}
        if config.get("fault_replica") is not None and replica.get("rank", 0) != config["fault_replica"]:
            self.fault = "ok"  # the fault strikes one replica; this one runs ok
        self.collective = None
        self.after = config.get("after_steps")
        self.steps_done = 0
        self.losses = 0
        self.trained = 0  # steps since reset: `learn`'s curve
        self.summed = 0.0  # `learn`'s loss sum since the last epoch_loss()
        self.summed_steps = 0
        self.steps_per_epoch = 1
        # No framework: the mode and precision are reported as configured, nothing runs in them.
        self.execution = {"how": "the fault worker (no framework: mode and precision only reported)"}

    def _strike(self):
        fault, config = self.fault, self.config
        if fault == "raise":
            raise RuntimeError("fault worker: raised on purpose after %d steps" % self.steps_done)
        if fault == "segfault":
            _segfault()
        elif fault == "abort":
            os.abort()
        elif fault == "exit":
            code = config.get("exit_code")
            os._exit(1 if code is None else code)
        elif fault == "hang":
            _hang(config, self.events)
        elif fault == "oom":
            _oom()
        elif fault == "garbage":
            with open(self.result_path, "w") as f:
                f.write('{"status": "ok", "epochs": [ this is not json')
            os._exit(0)
        elif fault == "no_result":
            os._exit(0)
        elif fault == "unsupported":
            raise base.Unsupported("fault worker: unsupported on purpose")
        elif fault == "unavailable":
            raise base.Unavailable("fault worker: unavailable on purpose (nothing to install)")
        elif fault == "sleep":
            time.sleep(config.get("seconds") or 0)
            self.fault = "ok"
        elif fault == "hold":
            _hold(config, self.events)
            self.fault = "ok"
        elif fault == "hostile":
            _hostile(config, self.events)
        elif fault == "orphans":
            _orphans(self.events)
        elif fault == "flood":
            _flood(config)
        elif fault == "hostile_result":
            _hostile_result(self.result_path)

    def setup(self):
        if self.after is None:
            self._strike()
        if self.fault == "hostile":  # what a framework says of itself is outside text too
            return {"framework_version": "fault " + HOSTILE, "threads": {}, "device_name": HOSTILE}
        return {"framework_version": "fault", "threads": {}, "device_name": "none"}

    def join_replicas(self, replica):
        self.collective = _Collective(replica["rank"], replica["count"], replica["address"])

    def build_model(self):
        return 0

    def tracer(self):
        return _Tracer(replicated=(self.config.get("replica") or {}).get("count", 1) > 1)

    def reset(self):
        self.losses = 0
        self.trained = 0
        self.summed, self.summed_steps = 0.0, 0

    def load_data(self):
        size = self.config["dataset_size"]
        val = int(round(size * self.config["val_fraction"]))
        return size - val, val

    def prepare_epoch(self, order):
        self.steps_per_epoch = max(1, len(order) // self.config["batch_size"])
        return len(order) // self.config["batch_size"]

    def _epochs_trained(self):
        return float(self.trained) / self.steps_per_epoch

    def train_step(self, index):
        if self.after is not None and self.steps_done == self.after:
            self._strike()
        self.steps_done += 1
        if self.collective is not None:
            self.collective.all_reduce()  # as a framework's gradient exchange: every replica waits
        # A little real work so a step has a duration, as a framework's would; `work` adds a known
        # amount of it (a slowdown of known size for the statistics' power check).
        self.losses += sum(range(20000 + (self.config.get("work") or 0))) % 7
        if self.fault == "learn":  # the loss of this step, on the fixed curve
            self.summed += 2.3 * 0.5 ** self._epochs_trained()
            self.summed_steps += 1
        self.trained += 1

    def epoch_loss(self):
        if self.fault != "learn" or not self.summed_steps:
            return None
        value = self.summed / self.summed_steps
        self.summed, self.summed_steps = 0.0, 0
        return value

    def evaluate(self):
        if self.fault != "learn":
            return None, None
        done = self._epochs_trained()
        return 2.3 * 0.5 ** done, 1.0 - 0.9 * 0.5 ** done
