"""Byte counts as people read and write them: 1.5 GB, 512MB."""
from __future__ import annotations

import re
from decimal import Decimal

# Decimal units as people read them; KiB/MiB/GiB/TiB binary.
_UNITS = {"": 1, "B": 1, "K": 10**3, "KB": 10**3, "M": 10**6, "MB": 10**6, "G": 10**9, "GB": 10**9,
          "T": 10**12, "TB": 10**12, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
_SIZE = re.compile(r"(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?P<unit>[A-Z]*)")
MAX_BYTES = 2**63 - 1  # what a signed 64-bit count holds; far beyond any machine


def format_bytes(n: float) -> str:
    """1536 -> '1.5 KB'; decimal units, as people read them."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def parse_bytes(text: str) -> int:
    """'512MB', '1.5GB', '800k', '10TB', '1048576' -> bytes; ValueError saying how to write a size."""
    match = _SIZE.fullmatch(str(text).strip().upper().replace(" ", ""))
    if match is None or match["unit"] not in _UNITS:
        raise ValueError(f"cannot read {text!r} as a size; write e.g. 512MB, 1.5GB or 800000000 "
                         "(units: B, KB, MB, GB, TB; KiB, MiB, GiB, TiB)")
    value = int(Decimal(match["number"]) * _UNITS[match["unit"]])
    if not 1 <= value <= MAX_BYTES:
        raise ValueError(f"cannot use {text!r} as a size: it must be at least 1 byte and at most 8 EB")
    return value
