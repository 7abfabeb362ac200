"""Core's error messages as the app shows them: the command-line flags they name become the app's own fields,
and a status-bar line puts the reason before the file (named, not its whole path) so a narrow bar keeps it.

Core writes its messages for the command line (`give --memory-budget at least 139.3 MB`); the app maps them
here rather than core learning about widgets.
"""
from __future__ import annotations

import re

from leanseg.core.jobs.batch_plan import CLI_RECURSE

APP_RECURSE = "tick Include sub-folders"  # the CLI's --recursive is the batch dialog's checkbox

# (what core says, what the app says instead), applied in order: whole phrases before the bare flags.
APP_WORDING = (
    ("give --memory-budget at least", "raise Memory budget (Inference panel) to at least"),
    ("lower --memory-budget", "lower Memory budget (Inference panel)"),
    (CLI_RECURSE, APP_RECURSE),
    ("--memory-budget", "Memory budget"),
    ("--tiling", "Tiling"),
    ("--device", "Device"),
    ("--engine", "Engine"),
    ("--precision", "Precision"),
    ("--scales", "Multi-scale averaging"),
    ("choose another --out", "choose another output folder"),
    ("choose a folder for --out", "choose a folder for the output"),
)
# An absolute path with no spaces inside a sentence ("the card /tmp/m/x.json lists ..."), POSIX or Windows.
_INLINE_PATH = re.compile(r"(?<![\w.:/])(?:[A-Za-z]:[\\/]|/)(?:[^\s:;,()'\"\\/]+[\\/])+([^\s:;,()'\"\\/]+)")
_PATH_START = re.compile(r" (?:/|[A-Za-z]:[\\/])")  # where a path begins after the words before it


def for_the_app(message: str) -> str:
    """`message` with the command-line flags it names replaced by the app's fields ("Memory budget")."""
    for flag, field in APP_WORDING:
        message = re.sub(rf"{re.escape(flag)}(?![\w-])", field, message)  # --device, not --device-map
    return message


def _is_path(text: str) -> bool:
    return bool(re.match(r"/|[A-Za-z]:[\\/]", text))


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def status_line(message: str) -> str:
    """A one-line form of an error for the status bar: the reason first, files by their name only.

    "Could not open the model: /a/b/x.onnx: the card /a/b/x.json lists 3 classes" becomes
    "The card x.json lists 3 classes · could not open the model x.onnx".
    """
    subject, path = "", ""
    head, _, why = message.partition(": ")
    after_head, _, why_after_path = why.partition(": ")
    inline = _PATH_START.search(head)
    if why and _is_path(head):  # "PATH: why"
        path, message = head, why
    elif why_after_path and _is_path(after_head):  # "What failed: PATH: why"
        path, subject, message = after_head, _lower_first(head), why_after_path
    elif why and inline:  # "What failed PATH: why"
        path, subject, message = head[inline.start() + 1:], _lower_first(head[:inline.start()]), why
    if path:
        path = path.rstrip("\\/") or path  # a folder written "/out/" is named "out"
        name = re.split(r"[\\/]", path)[-1] or path
        subject = f"{subject} {name}" if subject else name
        folder = path[:len(path) - len(name)]
        if len(folder) > 1 and not re.fullmatch(r"[A-Za-z]:[\\/]", folder):  # never strip the bare root
            # files beside it ("the card /m/net.json") by name too, where the folder begins a path
            message = re.sub(rf"(?<![\w.:/]){re.escape(folder)}(?=[^\s\\/])", "", message)
    message = _INLINE_PATH.sub(lambda match: match.group(1), message)
    message = message[:1].upper() + message[1:]
    return f"{message} · {subject}" if subject else message
