"""Check a file is a video before FFmpeg sees it, and explain why one cannot be opened.

FFmpeg opens almost anything (a text file decodes as ANSI art, a PNG as a one-frame video), so
the container is recognised from its first bytes. MP4/MOV files are also scanned box by box,
which tells a truncated recording (its index, the `moov` box, never written) from an empty one.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

VIDEO_SUFFIXES = (".mp4", ".m4v", ".mov", ".avi", ".mkv", ".webm", ".mpg", ".mpeg", ".ts", ".flv", ".wmv", ".ogv")
_MP4_TOP_BOXES = {b"ftyp", b"moov", b"mdat", b"free", b"wide", b"skip", b"pnot", b"uuid", b"moof", b"styp"}
_IMAGE_SIGNATURES = {
    b"\x89PNG\r\n\x1a\n": "PNG",
    b"\xff\xd8\xff": "JPEG",
    b"II*\x00": "TIFF",
    b"MM\x00*": "TIFF",
    b"BM": "BMP",
}


class VideoReadError(Exception):
    """An input that is not a readable video; the message names the file and the reason."""

    def __init__(self, path: str | Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = Path(path)
        self.reason = reason


@dataclass(frozen=True)
class Mp4Box:
    kind: str  # four-character box type, e.g. 'moov'
    offset: int  # byte offset of the box header in the file
    size: int  # declared size in bytes, header included
    complete: bool  # False when the file ends before the box does


def sniff_container(head: bytes) -> str | None:
    """The container named by a file's first bytes ('mp4', 'avi', 'mkv', ...), or None."""
    if len(head) >= 8 and head[4:8] in _MP4_TOP_BOXES:
        return "mp4"
    if head[:4] == b"RIFF" and head[8:12] == b"AVI ":
        return "avi"
    if head[:4] == b"\x1a\x45\xdf\xa3":
        return "mkv"
    if head[:3] == b"FLV":
        return "flv"
    if head[:4] == b"OggS":
        return "ogg"
    if head[:8] == b"\x30\x26\xb2\x75\x8e\x66\xcf\x11":
        return "asf"
    if head[:4] == b"\x00\x00\x01\xba":
        return "mpeg-ps"
    if len(head) > 188 and head[0] == 0x47 and head[188] == 0x47:
        return "mpeg-ts"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    return None


def scan_mp4_boxes(path: Path) -> list[Mp4Box]:
    """Top-level boxes of an MP4/MOV file, in file order; the last is incomplete if the file is cut."""
    boxes: list[Mp4Box] = []
    file_size = path.stat().st_size
    with path.open("rb") as handle:
        offset = 0
        while offset + 8 <= file_size:
            handle.seek(offset)
            header = handle.read(16)
            size = int.from_bytes(header[:4], "big")
            kind = header[4:8].decode("latin-1")
            if size == 1 and len(header) >= 16:
                size = int.from_bytes(header[8:16], "big")
            elif size == 0:  # box runs to the end of the file
                size = file_size - offset
            if size < 8:
                boxes.append(Mp4Box(kind, offset, size, complete=False))
                break
            boxes.append(Mp4Box(kind, offset, size, complete=offset + size <= file_size))
            offset += size
    return boxes


def check_video_file(path: Path) -> str:
    """The container kind of `path`; VideoReadError when it is missing, empty, an image or not a video."""
    if not path.exists():
        raise VideoReadError(path, "no such file")
    if path.is_dir():
        raise VideoReadError(path, "is a folder, not a video")
    if path.stat().st_size == 0:
        raise VideoReadError(path, "file is empty (0 bytes)")
    try:
        with path.open("rb") as handle:
            head = handle.read(512)
    except OSError as err:  # e.g. no permission to read it
        raise VideoReadError(path, f"cannot read it ({err.strerror or err})") from None
    for signature, name in _IMAGE_SIGNATURES.items():
        if head.startswith(signature):
            raise VideoReadError(path, f"is a {name} image, not a video; segment images with `leanseg segment`")
    kind = sniff_container(head)
    if kind is None:
        raise VideoReadError(
            path, "not a video (unknown file signature); expected MP4/MOV, AVI, MKV/WebM, MPEG, FLV, OGG or WMV"
        )
    if kind == "mp4":
        _check_mp4_index(path)
    return kind


def explain_unopenable(path: Path, kind: str) -> str:
    """Why OpenCV/FFmpeg could not open a file that looked like a `kind` video."""
    if kind == "mp4":
        boxes = scan_mp4_boxes(path)
        media_bytes = sum(box.size - 8 for box in boxes if box.kind == "mdat")
        if media_bytes <= 0:
            return "contains no frames (the MP4 has no media data)"
    return f"OpenCV/FFmpeg could not open this {kind.upper()} file (damaged, or a codec this build lacks)"


def _check_mp4_index(path: Path) -> None:
    boxes = scan_mp4_boxes(path)
    has_index = any(box.kind in ("moov", "moof") and box.complete for box in boxes)
    if has_index:
        return
    cut = next((box for box in boxes if not box.complete), None)
    file_size = path.stat().st_size
    if cut is not None:
        raise VideoReadError(
            path,
            f"truncated MP4: the '{cut.kind}' box at byte {cut.offset} declares {cut.size} bytes but the file "
            f"ends after {file_size - cut.offset}; its index (the 'moov' box) is missing, so no frame can be "
            "located (a recording that was never finalised?)",
        )
    raise VideoReadError(path, "damaged MP4: it has no index (no 'moov' box), so no frame can be located")
