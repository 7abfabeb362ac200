"""The video panel's export: ask for a name, guard the user's files, run the export, show its progress.

Mixed into VideoPanel, which provides the widgets, the VideoExport worker and the signals used here.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QDialog, QFileDialog, QLabel, QMessageBox, QProgressBar

from leanseg.core.events import JobEvent
from leanseg.core.io.video import VideoInfo
from leanseg.core.jobs import VideoJobOptions, VideoJobSummary
from leanseg.core.jobs.video_guard import VideoOutputRefused
from leanseg.core.predict import InferenceOptions

from .export import VideoExport, export_csv_path, export_guard, files_to_replace


def clock_text(seconds: float) -> str:
    """`m:ss.s`, as the panel shows positions and times left."""
    minutes, secs = divmod(max(seconds, 0.0), 60)
    return f"{int(minutes)}:{secs:04.1f}"


class ExportActionsMixin(QDialog):
    """`choose_export`, `export_to(path)`, `cancel_export`, and the export worker's signals -> widgets."""

    if TYPE_CHECKING:  # provided by VideoPanel
        job_event: ClassVar[Signal]
        export_finished: ClassVar[Signal]
        export_failed: ClassVar[Signal]
        source: Path | None
        info: VideoInfo | None
        model_path: Path | None
        options: InferenceOptions
        exporting: bool
        last_summary: VideoJobSummary | None
        export: VideoExport
        progress: QProgressBar
        export_label: QLabel

        def pause(self) -> None: ...
        def _refresh(self) -> None: ...
        def _show_error(self, message: str) -> None: ...

    def choose_export(self) -> None:
        """Ask for the video's name, then once whether to replace any files of the user's the export would write."""
        if self.source is None:
            return
        start = str(self.source.with_name(f"{self.source.stem}_segmented.mp4"))
        name, _ = QFileDialog.getSaveFileName(self, "Export segmented video", start, "MP4 video (*.mp4)",
                                              options=QFileDialog.Option.DontConfirmOverwrite)  # we ask below
        if not name:
            return
        try:
            foreign = files_to_replace(self.source, Path(name))
        except VideoOutputRefused as err:  # the input video, a folder: never replaced, so no question
            self._show_error(f"Not exported: {err}")
            return
        if foreign and not self._confirm_replace(foreign):
            return
        self.export_to(Path(name), overwrite=bool(foreign))

    def export_to(self, output: Path, overwrite: bool = False) -> bool:
        """Segment the whole video into `output` (and `output` with .csv) on a background thread; playback pauses.

        Refused with a message, writing nothing, when an output is the input video, a folder, or a file
        no leanseg video run wrote (unless `overwrite`; the input is never replaced)."""
        if self.source is None or self.model_path is None:
            self._show_error("Open a video and a model first: export needs both.")
            return False
        if self.exporting:
            return False
        output = Path(output)
        guard = export_guard(self.source, output, overwrite)
        try:
            guard.check()
        except VideoOutputRefused as err:
            self._show_error(f"Not exported: {err}")
            return False
        self.pause()
        self.progress.setRange(0, (self.info.frame_count if self.info else None) or 0)
        self.progress.setValue(0)
        self.export_label.setText(f"Exporting to {output}…")
        self.exporting = True
        self.export.start(self.source, output, self.model_path, self.options,
                          VideoJobOptions(csv_path=export_csv_path(output)), guard)
        self._refresh()
        return True

    def cancel_export(self) -> None:
        if self.exporting:
            self.export.cancel()
            self.export_label.setText("Cancelling after the current frame…")

    # -- export worker -> widgets -------------------------------------------------------------------------
    def _on_export_event(self, event: JobEvent) -> None:
        self.job_event.emit(event)
        if event.kind == "start" and event.count:
            self.progress.setRange(0, event.count)
        elif event.kind == "frame" and event.index is not None:
            self.progress.setValue(event.index + 1)
            fps = float(event.data.get("fps", 0.0))
            left = (event.count - event.index - 1) / fps if event.count and fps > 0 else None
            eta = f" · ETA {clock_text(left)}" if left is not None else ""
            self.export_label.setText(f"Exporting frame {event.index + 1}/{event.count or '?'} · {fps:.1f} fps{eta}")

    def _on_export_finished(self, summary: VideoJobSummary) -> None:
        self.last_summary, self.exporting = summary, False
        output = summary.output or "(nothing written)"
        if summary.cancelled:
            text = f"Cancelled after {summary.frames_done} frame(s): {output} holds them and plays."
        else:
            text = f"Exported {summary.frames_done} frame(s) to {output} at {summary.fps:.1f} fps."
        if summary.stop_note:
            text += f" Warning: {summary.stop_note}"
        self.export_label.setText(text)
        self._refresh()
        self.export_finished.emit(summary)

    def _on_export_failed(self, message: str) -> None:
        self.exporting = False
        self.export_label.setText(f"Export failed: {message}")
        self._refresh()
        self._show_error(f"Export failed: {message}")
        self.export_failed.emit(message)

    def _confirm_replace(self, foreign: list[Path]) -> bool:
        names = "\n".join(str(path) for path in foreign)
        answer = QMessageBox.question(
            self, "Replace files?",
            f"The export would replace these files, which leanseg did not write:\n{names}\n\nReplace them?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, QMessageBox.StandardButton.No)
        return answer == QMessageBox.StandardButton.Yes
