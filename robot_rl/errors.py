"""Errors that end a command with a one-line message and exit code 2 (bad input, not a bug)."""


class UsageError(Exception):
    """Bad user input: an option value, a missing or corrupt file. The message names the culprit."""
