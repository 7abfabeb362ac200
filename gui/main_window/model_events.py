"""What the main window shows when the worker opens a model, or cannot: the banner, names, legend, device, and the
shipped model standing in for one that failed; and the card editor for a graph model's card.

Mixed into MainWindow, which connects the controller's model signals to these handlers.
"""
from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QMainWindow

from leanseg.core.assets import default_model_path
from leanseg.core.io.images import ImageData
from leanseg.core.model.card import CardError

from ..inference.latency import freeze_long_lived_objects
from ..inference.worker import ModelStatus, kept_note
from ..viewer.controls import InferenceControls
from ..viewer.legend import OverlayPanel
from .about import model_title
from .banner import ModelBanner
from .card_editor import CardEditor, card_editor_for, card_notice
from .status_text import StatusField


class ModelEventsMixin(QMainWindow):
    """The worker's model signals -> widgets; MainWindow provides the widgets and state used here."""

    if TYPE_CHECKING:  # provided by MainWindow
        model_changed: ClassVar[Signal]
        job_ended: ClassVar[Signal]
        error_shown: ClassVar[Signal]
        image: ImageData | None
        model_status: ModelStatus | None
        model_requested: Path | None
        refusal_notice: str
        job_waits_for_model: bool
        last_error: str
        banner: ModelBanner
        controls: InferenceControls
        overlay_panel: OverlayPanel
        status_labels: dict[str, StatusField]
        _stand_in_loading: bool
        _busy: bool

        def open_model(self, path: Path) -> None: ...
        def segment_current(self) -> None: ...
        def show_error(self, title: str, message: str) -> None: ...
        def show_status_error(self, message: str, timeout_ms: int = 0) -> None: ...
        def _use_device(self, device: str) -> None: ...
        def _refresh_actions(self) -> None: ...
        def _clear_result(self) -> None: ...

    def edit_card(self) -> CardEditor | None:
        """The card editor for the loaded graph model; saving writes NAME.json beside it and reopens the model."""
        status = self.model_status
        try:
            if status is None:
                raise ValueError("open a model first")
            editor = card_editor_for(self, status.path, status.info)
        except (ValueError, CardError) as err:
            self.show_error("Edit card", str(err))
            return None
        editor.saved.connect(lambda _card: self.open_model(editor.model_path))
        self.card_editor = editor
        editor.open()
        return editor

    def _on_model_ready(self, status: ModelStatus) -> None:
        # The worker hands back the same ModelInfo while it keeps its model (options changed) and a new one for
        # each model file it loads, even the same file again.
        new_model = self.model_status is None or self.model_status.info is not status.info
        self.model_status = status
        self.job_waits_for_model = False  # the image is segmented below
        if new_model and not self._stand_in_loading:
            self.refusal_notice = ""  # a model the user asked for is in use: the refusal is old news
        self._stand_in_loading = False
        notice = card_notice(status.path, status.info)
        if self.refusal_notice:  # the shipped model stands in for one that failed: keep saying so
            self.banner.show_message(self.refusal_notice)
        elif notice:
            self.banner.show_card_notice(notice)
        else:
            self.banner.hide()
        name = model_title(status)
        architecture = str(status.info.provenance.get("architecture") or "")
        self.controls.set_model_name(name, "\n".join(filter(None, [str(status.path or ""), architecture])))
        if new_model:
            self.overlay_panel.legend.set_classes(status.info.class_names, status.info.class_colours)
            self._clear_result()  # the old model's labels and run must not stand under the new model's legend
        self.status_labels["model"].setText(f"{name} · {status.info.config.num_classes} classes")
        if self.statusBar().currentMessage().startswith("Loading model"):
            self.statusBar().showMessage(f"Model {name} ready on {status.device}", 5000)
        self._use_device(status.device)
        self._refresh_actions()
        freeze_long_lived_objects()  # the model's objects live as long as it is loaded
        self.model_changed.emit(status)
        # A job still running was queued after this model (the worker takes requests in order) and will use it.
        if new_model and self.image is not None and not self._busy:
            self.segment_current()

    def _on_model_failed(self, message: str) -> None:
        reason = message.removeprefix("Could not open the model: ")  # the banner's bold words say it already

        def notice(then: str) -> str:
            return f"<b>The model could not be opened.</b> {html.escape(reason)}<br>{then}"

        if self.model_status is not None:  # a model is loaded and stays: say why the new one was refused
            self.model_requested = self.model_status.path
            if self.refusal_notice:  # the stand-in stays in use: the banner names the latest refusal
                stand_in = self.model_status.path
                assert stand_in is not None, "the shipped model stands in, opened from its file"
                kept = stand_in.name
                reason = reason.removesuffix(f" {kept_note(kept)}")  # the banner's last line says it
                self.refusal_notice = notice(f"Still using the shipped model {kept}.")
                self.banner.show_message(self.refusal_notice)
            self.show_error("Model", message)
            return
        failed = self.model_requested
        self.model_requested = None  # nothing to segment with until a model opens
        self.controls.set_model_name("no model")
        self._refresh_actions()
        fallback = default_model_path()
        use_default = failed is not None and failed != fallback and fallback.is_file()
        text = notice(f"Using the shipped model {fallback.name} instead." if use_default
                      else "Open a model file to segment images.")
        self.banner.show_message(text)
        self.controls.clear_failure()  # as show_error does: an older failure's reason is old news
        self.show_status_error(message)
        self.last_error = message
        self.error_shown.emit(message)
        if use_default:
            self.open_model(fallback)
            self._stand_in_loading, self.refusal_notice = True, text
        elif self.job_waits_for_model:  # no stand-in either: the image's job ends here
            self.job_waits_for_model = False
            self.controls.show_outcome("failed", complete=False)
            self.job_ended.emit("failed")
