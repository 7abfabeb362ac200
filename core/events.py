"""Job events: what jobs report to the CLI, the GUI and the memory timeline."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

EventKind = Literal["start", "plan", "tile", "image", "frame", "info", "warning", "error", "cancelled", "done"]


@dataclass(frozen=True)
class JobEvent:
    kind: EventKind
    message: str = ""  # one human-readable line
    index: int | None = None  # 0-based tile / image / frame index
    count: int | None = None  # how many tiles / images / frames in all, when known
    path: str | None = None  # the file concerned
    live_bytes: int | None = None  # bytes the engine holds live at this moment
    data: dict[str, Any] = field(default_factory=dict)  # kind-specific details

    @property
    def more_follow(self) -> bool:
        """Whether more tiles / images / frames of the job come after this one (known only with index and count)."""
        return self.index is not None and self.count is not None and self.index + 1 < self.count


EventSink = Callable[[JobEvent], None]


def ignore_event(event: JobEvent) -> None:
    """The default sink."""


def said_once(on_event: EventSink, flag: str) -> EventSink:
    """`on_event`, passing on only the first event whose data sets `flag` (a note a job gives once, e.g. that the
    alpha channel is ignored), and every other event."""
    said = False

    def forward(event: JobEvent) -> None:
        nonlocal said
        if event.data.get(flag):
            if said:
                return
            said = True
        on_event(event)

    return forward


class JobCancelled(Exception):
    """Raised inside a job when its cancel event is set; nothing half-written is left."""
