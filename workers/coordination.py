"""The replicas of a data-parallel run agree on what the runner decides from timings.

Each replica measures its own steps, so left alone one would call its warm-up steady a step before
another, or add an extra timed epoch the other does not: their framework's collectives would then
no longer pair up, and one replica would wait forever in an all-reduce the other never joins. So
replica 0 decides (is the warm-up over? one more extra epoch? stop at the target?) and tells the
others, over bench's own channel: a TCP connection from each replica to replica 0 on the
rendezvous host, apart from the framework's, in the standard library (workers run on Python 3.6+).
"""

import json
import socket
import time

CONNECT_SECONDS = 120  # how long a replica keeps trying to reach replica 0 while it starts


class Channel(object):
    """Replica 0's decisions, heard by every replica."""

    def __init__(self, rank, count, address):
        host, port = address.rsplit(":", 1)
        self.rank = rank
        self.peers = []
        self._files = []
        if rank == 0:
            server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            server.bind((host, int(port)))
            server.listen(count)
            try:
                self.peers = [server.accept()[0] for _ in range(count - 1)]
            finally:
                server.close()
        else:
            self.peers = [_connect(host, int(port))]
            self._files = [self.peers[0].makefile("r")]

    def decide(self, value):
        """Replica 0's ``value`` (plain JSON data), on every replica."""
        if self.rank == 0:
            line = (json.dumps(value) + "\n").encode()
            for peer in self.peers:
                peer.sendall(line)
            return value
        line = self._files[0].readline()
        if not line:
            raise ConnectionError("replica 0 closed bench's channel between the replicas")
        return json.loads(line)

    def close(self):
        for f in self._files:
            f.close()
        for peer in self.peers:
            peer.close()


def _connect(host, port):
    deadline = time.time() + CONNECT_SECONDS
    while True:
        try:
            sock = socket.create_connection((host, port), timeout=5)
            sock.settimeout(None)
            return sock
        except (OSError, IOError):
            if time.time() > deadline:
                raise
            time.sleep(0.05)


class Alone(object):
    """A run of one process: its own decisions stand."""

    def decide(self, value):
        return value

    def close(self):
        pass


def channel_for(config):
    """The channel of this run's replicas, or Alone for a run of one process."""
    replica = config.get("replica") or {}
    if replica.get("count", 1) < 2:
        return Alone()
    return Channel(replica["rank"], replica["count"], replica["control"])
