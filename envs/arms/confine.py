"""What an arm file may read: its MJCF and every file that MJCF names, all inside one folder.

An arm file (ArmSpec JSON) is data a user may be handed, like a dataset: loading it never reads outside its folder
(or, for a ``package:resource`` MJCF, outside that package's folder). MuJoCo follows whatever paths the MJCF
holds (``<include file>``, mesh, texture, height-field and skin files, ``<compiler meshdir texturedir assetdir>``),
so before MuJoCo sees it the MJCF and each file it includes are parsed here and every path checked: it must stay
inside the folder wherever MuJoCo looks it up (the main file's folder, the including file's, the asset folders),
and what it names must be a regular file reached without symlinks. A FIFO or device would block or never end.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

from robot_rl.envs.arms.spec import ArmError
from robot_rl.envs.errors import file_problem

# Elements whose ``file`` is itself MJCF, parsed here in turn: an include, and a model asset (a whole MJCF).
_MJCF_ELEMENTS = ("include", "model")
_ASSET_DIRS = ("meshdir", "texturedir", "assetdir")  # of <compiler>: folders the asset files are looked up in


def check_confined(mjcf: str, root: Path, culprit: str) -> Path:
    """The MJCF file ``mjcf`` (relative to ``root``) names, refused (one-line ArmError naming ``culprit`` and the
    file) unless it is a regular file inside ``root`` whose every named file and folder is inside ``root`` too,
    no symlink, and (where it exists) a regular file."""
    root = Path(os.path.realpath(root))
    main = _checked(root, [root], mjcf, culprit, "mjcf")[0]
    _check_file(main, culprit, "mjcf", required=True)
    seen, pending, references, dirs = set(), [main], [], []
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        for element in _parse(current, culprit).iter():
            for name, value in element.attrib.items():
                if element.tag in _MJCF_ELEMENTS and name == "file":
                    for path in _checked(root, [main.parent, current.parent], value, culprit, current):
                        if _check_file(path, culprit, current):
                            pending.append(path)
                elif name.startswith("file"):  # file, and a cube texture's fileright ... fileback
                    references.append((current, value))
                elif element.tag == "compiler" and name in _ASSET_DIRS:
                    dirs.extend(_checked(root, [main.parent, current.parent], value, culprit, current))
    for path in dirs:
        _check_file(path, culprit, "mjcf", folder=True)
    for current, value in references:
        for path in _checked(root, [main.parent, current.parent, *dirs], value, culprit, current):
            _check_file(path, culprit, current)
    return main


def _checked(root: Path, bases: list[Path], value: str, culprit: str, named_in) -> list[Path]:
    """``value`` joined to each folder MuJoCo may look it up in (an absolute one as it is), each refused unless it
    stays inside ``root`` with no symlink on the way."""
    paths = []
    for base in dict.fromkeys(bases):
        try:
            path = Path(os.path.normpath(base / value))
        except (TypeError, ValueError):
            raise ArmError(f"{culprit}: {named_in}: {value!r} is not a file name") from None
        if not path.is_relative_to(root):
            raise ArmError(f"{culprit}: {named_in} names {value!r}, which leads outside the arm's folder {root}")
        step = root
        for part in path.relative_to(root).parts[:-1]:  # the folders on the way (the last part is checked by use)
            step = step / part
            if step.is_symlink():
                raise ArmError(f"{culprit}: {named_in} names {value!r}: {step} is a symlink (refusing to follow "
                               f"it; an arm's files are its own)")
        paths.append(path)
    return paths


def _check_file(path: Path, culprit: str, named_in, required: bool = False, folder: bool = False) -> bool:
    """Whether ``path`` is there to read: a regular file (or a folder, with ``folder``), never a symlink. A missing
    one is left to MuJoCo's own message (it looks in several folders) unless ``required``."""
    problem = file_problem(path)
    if problem == "no such file" and not required:
        return False
    if folder and problem == "a folder, not a file":
        return True
    if problem:
        raise ArmError(f"{culprit}: {named_in}: {path} is {problem}")
    return True


def _parse(path: Path, culprit: str) -> ET.Element:
    try:
        return ET.parse(path).getroot()
    except (ET.ParseError, OSError, UnicodeDecodeError) as err:
        raise ArmError(f"{culprit}: {path} does not load: {str(err).splitlines()[0]}") from None
