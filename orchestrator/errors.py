"""The project's exceptions. The CLI is the only place that turns them into messages and exit codes."""

from __future__ import annotations


class BenchError(Exception):
    """Base of every error bench reports to the user as one line."""


class ConfigError(BenchError):
    """A matrix file or a command-line option is invalid; the message names file, line and key."""


class DatabaseError(BenchError):
    """The results database is missing, of another schema version, or unusable."""


class EnvironmentSetupError(BenchError):
    """A framework environment could not be created."""


class RunNotFound(BenchError):
    """No run with the id asked for."""


class DatasetError(BenchError):
    """A data folder or file is missing, malformed, hostile or larger than bench's limits; names the file."""


class StatsError(BenchError):
    """Figures unfit for statistics: none, not a number, infinite, or not positive; says which."""
