"""Opening another model while an image is shown: the old labels go at once, the image is segmented again with
the new model, and a model file that cannot be opened leaves the old model, labels and legend as they were."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from leanseg.core.model import MobileUNet
from leanseg.core.model.checkpoint import default_info, save_checkpoint

from .conftest import JOB_TIMEOUT_MS, TINY

SIX_CLASSES = replace(TINY, num_classes=6)


@pytest.fixture(scope="module")
def six_class_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(1)
    model = MobileUNet(SIX_CLASSES).eval()
    with torch.no_grad():  # favour the classes the 4-class model lacks, so the new labels are visibly new
        head = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)][-1]
        head.bias.copy_(torch.tensor([0.0, 0.0, 0.0, 0.0, 0.3, 0.2]))
    return save_checkpoint(tmp_path_factory.mktemp("models") / "six.safetensors", model, default_info(SIX_CLASSES))


def legend_names(window) -> list[str]:  # type: ignore[no-untyped-def]
    legend = window.overlay_panel.legend
    return [legend.item(row).text().split("  —  ")[0] for row in range(legend.count())]


def test_a_new_model_clears_the_old_labels_and_segments_the_image_again(qtbot, make_window, gui_tiny_checkpoint,
                                                                        six_class_checkpoint, small_image):
    window = make_window(gui_tiny_checkpoint)
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS):
        window.open_image(small_image)
    assert window.controls.last_result.text().startswith("Last run")
    assert len(legend_names(window)) == 4

    cleared: list[bool] = []  # at the moment the new model is announced: no old labels, no old run
    window.model_changed.connect(lambda _status: cleared.append(
        window.viewer.labels is None and window.result is None and window.controls.last_result.text() == ""))
    with qtbot.waitSignals([window.model_changed, window.segmented], timeout=JOB_TIMEOUT_MS,
                           order="strict"):
        window.open_path(six_class_checkpoint)
    assert cleared == [True]

    info = window.model_status.info
    assert window.model_status.path == six_class_checkpoint and info.config.num_classes == 6
    labels = window.result.labels
    assert labels.shape == (72, 96) and labels.max() < 6
    assert 4 in labels or 5 in labels  # classes only the new model has: this run used it
    np.testing.assert_array_equal(window.viewer.labels, labels)
    assert window.viewer.class_names == info.class_names
    assert legend_names(window) == list(info.class_names)
    assert window.controls.last_result.text().startswith("Last run")
    assert "6 classes" in window.status_labels["model"].text()


def test_a_model_that_cannot_be_opened_leaves_the_old_model_labels_and_legend(qtbot, make_window,
                                                                              gui_tiny_checkpoint, small_image,
                                                                              tmp_path):
    window = make_window(gui_tiny_checkpoint)
    with qtbot.waitSignal(window.segmented, timeout=JOB_TIMEOUT_MS) as blocker:
        window.open_image(small_image)
    labels, names, last_run = blocker.args[0].labels, legend_names(window), window.controls.last_result.text()
    bad = tmp_path / "x.pt2"
    bad.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())

    with qtbot.assertNotEmitted(window.segmented, wait=300), \
            qtbot.waitSignal(window.error_shown, timeout=JOB_TIMEOUT_MS) as error:
        window.open_path(bad)
    assert "x.pt2" in error.args[0] and "still using tiny.safetensors" in error.args[0]
    assert window.model_status.path == gui_tiny_checkpoint and window.model_requested == gui_tiny_checkpoint
    np.testing.assert_array_equal(window.viewer.labels, labels)
    assert window.result is not None and window.result.labels is labels
    assert legend_names(window) == names and window.controls.last_result.text() == last_run
    assert "4 classes" in window.status_labels["model"].text()
