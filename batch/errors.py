"""Errors. A BatchError is one the user can fix: the CLI prints it as one `Error: ...` line and
exits 1. Anything else is a bug: the CLI says so, saves the traceback and exits 2."""


class BatchError(Exception):
    """A problem the user can fix: the message says what, where and how."""


class SourceError(BatchError):
    """An input path cannot be read as a source."""


class OutputError(BatchError):
    """The output folder cannot be written."""


class InternalError(Exception):
    """A bug in asr-batch, not in the input: never shown as a user error."""


class SqlError(InternalError):
    """A SQL file of asr-batch failed; the message names the file."""


class Interrupted(BaseException):
    """The run received a signal (SIGINT, SIGTERM, SIGHUP) and stopped; `signum` says which."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
