"""Byte counts as people read and write them: 1.5 GB, 512MB."""
from __future__ import annotations


def format_bytes(n: float) -> str:
    """1536 -> '1.5 KB'; decimal units, as people read them."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def parse_bytes(text: str) -> int:
    """'512MB', '1.5GB', '800k', '1048576' -> bytes (decimal units; KiB/MiB/GiB binary)."""
    units = {"": 1, "B": 1, "K": 10**3, "KB": 10**3, "M": 10**6, "MB": 10**6, "G": 10**9, "GB": 10**9,
             "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}
    cleaned = text.strip().upper().replace(" ", "")
    number = cleaned.rstrip("KMGIB")
    unit = cleaned[len(number):]
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"cannot read {text!r} as a size; write e.g. 512MB, 1.5GB or 800000000") from None
    if unit not in units or value <= 0:
        raise ValueError(f"cannot read {text!r} as a size; units: {', '.join(u for u in units if u)}")
    return int(value * units[unit])
