"""Core's error messages as the app shows them: the command-line flags they name become the app's own fields.

Core writes its messages for the command line (`give --memory-budget at least 139.3 MB`); the app maps them
here rather than core learning about widgets.
"""
from __future__ import annotations

# (what core says, what the app says instead), applied in order: whole phrases before the bare flags.
APP_WORDING = (
    ("give --memory-budget at least", "raise Memory budget (Inference panel) to at least"),
    ("lower --memory-budget", "lower Memory budget (Inference panel)"),
    ("--memory-budget", "Memory budget"),
    ("--tiling", "Tiling"),
    ("--device", "Device"),
    ("--engine", "Engine"),
    ("--precision", "Precision"),
    ("choose another --out", "choose another output folder"),
    ("choose a folder for --out", "choose a folder for the output"),
)


def for_the_app(message: str) -> str:
    """`message` with the command-line flags it names replaced by the app's fields ("Memory budget")."""
    for flag, field in APP_WORDING:
        message = message.replace(flag, field)
    return message
