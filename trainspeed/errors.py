"""The one exception type the CLI turns into a single error line and exit code 2."""


class UsageError(Exception):
    """Bad input from the user: a flag, a file, a batch size. The message says what and how to fix it."""
