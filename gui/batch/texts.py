"""What the batch dialog says and names: the default output folder, paths quoted in messages, elapsed time."""
from __future__ import annotations

import re
from pathlib import Path


def default_output_folder(in_dir: Path) -> Path:
    """`photos/` -> `photos_leanseg/` beside it: outputs never land among the inputs."""
    return in_dir.parent / f"{in_dir.name}_leanseg"


def quote_paths(message: str, paths: tuple[str, ...]) -> str:
    """`message` with each of `paths` in it set in quotes, so a folder whose name has spaces reads as one:
    'input folder /a/does not exist does not exist' -> 'input folder "/a/does not exist" does not exist'."""
    # the longest first (a/b_out before a/b); a bare relative name ("in") is a word in a sentence too: left be
    names = sorted({path for path in paths if re.search(r"[\\/]", path)}, key=len, reverse=True)
    if not names:
        return message
    pattern = "|".join(re.escape(name) for name in names)
    return re.sub(f"(?<![\\w\"])(?:{pattern})(?![\\w/\\\\\"])", lambda match: f'"{match.group(0)}"', message)


def clock(seconds: float) -> str:
    """12:34 or 1:02:03."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"
