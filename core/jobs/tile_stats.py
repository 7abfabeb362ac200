"""What the tiles of one image measured, gathered from its job events, for a summary a user can check.

The engine reports each tile ("tile i/n" with its peak); a summary says it once: how many tiles of what size,
the largest tile's peak and what that counts (engine tensors, CUDA allocated or process RSS), and, under a
--memory-budget, how much of the budget the job's tensors and image arrays took, beside the process peak.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..events import EventSink, JobEvent
from ..memory import format_bytes
from ..predict import Segmenter


@dataclass
class TileStats:
    """Collects the plan and tile events of one image; `watch(sink)` passes every event on to `sink`."""

    segmenter: Segmenter
    tiles: int = 0  # tiles run
    tile_shape: tuple[int, int] | None = None  # (rows, columns) in px of the last tile's core
    tile_peak_bytes: int = 0  # the largest tile's peak, in the measure `measure` names
    held_bytes: int = 0  # the image and its output arrays, held beside the tiles (from the plan)
    measure: str = ""  # what the tiles' peaks count, as the tiler says: engine tensors, CUDA allocated, process RSS

    def watch(self, sink: EventSink) -> EventSink:
        def on_event(event: JobEvent) -> None:
            if event.kind == "plan":
                self.held_bytes = int(event.data.get("held_bytes") or 0)
            elif event.kind == "tile":
                self.tiles += 1
                self.tile_peak_bytes = max(self.tile_peak_bytes, event.live_bytes or 0)
                shape = event.data.get("tile_shape")
                self.tile_shape = (int(shape[0]), int(shape[1])) if shape else self.tile_shape
                measure = str(event.data.get("measure") or "")
                # one tile measured otherwise (an eager fallback's RSS): no single measure to name
                self.measure = measure if self.tiles == 1 or measure == self.measure else "mixed"
            sink(event)

        return on_event

    def tiles_line(self, name: str) -> str:
        """'huge.png: 6 tiles of 1504x1344 px, each at most 92.5 MB of engine tensors'; '' for one pass."""
        if self.tiles < 2:
            return ""
        size = f" of {self.tile_shape[1]}x{self.tile_shape[0]} px" if self.tile_shape else ""
        known = self.tile_peak_bytes and self.measure not in ("", "mixed")
        peak = f", each at most {format_bytes(self.tile_peak_bytes)} of {self.measure}" if known else ""
        return f"{name}: {self.tiles} tiles{size}{peak}"

    def budget_text(self) -> str:
        """'tensor peak 140.5 MB (tiles and image arrays) of the 256.0 MB budget; ' under a --memory-budget whose
        measure the tiles report, else ''."""
        budget = self.segmenter.options.memory_budget
        if not budget or not self.tile_peak_bytes or self.measure != "engine tensors":
            return ""
        used = self.tile_peak_bytes + self.held_bytes
        what = " (tiles and image arrays)" if self.held_bytes else ""
        return f"tensor peak {format_bytes(used)}{what} of the {format_bytes(budget)} budget; "
