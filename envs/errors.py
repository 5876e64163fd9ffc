"""The envs' error types. ``UsageError`` is bad user input (an unknown task or arm, an arm file that cannot work);
``robot_rl.errors`` re-exports it, and the CLI ends a command that raised it with a one-line message and exit 2."""


class UsageError(Exception):
    """Bad user input: an option value, a missing or corrupt file. The message names the culprit."""
