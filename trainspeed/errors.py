"""The exception types the CLI turns into a single error line: bad input (exit code 2), and a device
that went away or a server that refused a request mid-run (exit code 1)."""


class UsageError(Exception):
    """Bad input from the user: a flag, a file, a batch size. The message says what and how to fix it."""


class DeviceLost(Exception):
    """The device stopped answering mid-run (a remote server died or the link broke).

    Not a property of the configuration being measured, so the bench does not record it as an
    error row and go on to the next one: the command stops with one line that says what was lost.
    """


class ServerRefused(RuntimeError):
    """A remote server refused a request or a step failed there. The bench records it as the error
    row of the configuration it measured; a training run stops with its one line."""
