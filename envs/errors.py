"""The envs' error types. ``UsageError`` is bad user input (an unknown task or arm, an arm file that cannot work);
``robot_rl.errors`` re-exports it, and the CLI ends a command that raised it with a one-line message and exit 2.
``file_problem`` says why a path is no plain file to read, for the loaders' one-line refusals."""

import os
import stat


class UsageError(Exception):
    """Bad user input: an option value, a missing or corrupt file. The message names the culprit."""


def file_problem(path: str | os.PathLike, follow_symlinks: bool = False) -> str | None:
    """Why ``path`` is not a plain file to read, in a few words ("no such file", "a symlink", "a folder", "a
    FIFO", ...), or None when it is one. A FIFO or a device blocks or never ends when read, and a symlink may lead
    out of the folder that holds it: loaders refuse them by name before reading. With ``follow_symlinks`` a
    symlink is judged by what it leads to."""
    try:
        mode = os.stat(path).st_mode if follow_symlinks else os.lstat(path).st_mode
    except FileNotFoundError:
        return "no such file"
    except (OSError, ValueError) as err:
        return f"cannot be read ({getattr(err, 'strerror', None) or err})"
    if stat.S_ISREG(mode):
        return None
    kinds = ((stat.S_ISLNK, "a symlink (refusing to follow it)"), (stat.S_ISDIR, "a folder, not a file"),
             (stat.S_ISFIFO, "a FIFO, not a regular file"), (stat.S_ISSOCK, "a socket, not a regular file"),
             (stat.S_ISCHR, "a character device, not a regular file"),
             (stat.S_ISBLK, "a block device, not a regular file"))
    return next((kind for is_kind, kind in kinds if is_kind(mode)), "not a regular file")
