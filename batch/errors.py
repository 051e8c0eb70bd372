"""Errors a user can hit; the CLI turns each into one `Error: ...` line and exit code 1."""


class BatchError(Exception):
    """A problem the user can fix: the message says what, where and how."""


class SourceError(BatchError):
    """An input path cannot be read as a source."""


class OutputError(BatchError):
    """The output folder cannot be written."""


class SqlError(BatchError):
    """A SQL file failed; the message names the file."""
