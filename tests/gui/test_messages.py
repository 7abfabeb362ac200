"""Core's messages in the app's words: flags become the app's fields; a status-bar line puts the reason first."""
from __future__ import annotations

from leanseg.gui.messages import for_the_app, status_line


def test_flags_become_the_fields_that_set_them() -> None:
    assert for_the_app("the smallest tile 70.2 MB; give --memory-budget at least 139.3 MB") == (
        "the smallest tile 70.2 MB; raise Memory budget (Inference panel) to at least 139.3 MB")
    assert for_the_app("close other programs, or lower --memory-budget to start with smaller tiles") == (
        "close other programs, or lower Memory budget (Inference panel) to start with smaller tiles")
    assert for_the_app("--tiling exact is impossible for this model; use fast or off") == (
        "Tiling exact is impossible for this model; use fast or off")
    assert for_the_app("--tiling exact is impossible with --scales: a resized tile's border is not the resized "
                       "image's; use fast or auto").startswith("Tiling exact is impossible with Multi-scale averaging:")


def test_a_status_line_puts_the_reason_before_the_files_name() -> None:
    assert status_line("Could not open the model: /m/x y/net.onnx: the card /m/x/net.json lists 3 classes") == (
        "The card net.json lists 3 classes · could not open the model net.onnx")
    assert status_line("Could not open the image /in/my photos/a b.png: [Errno 13] Permission denied") == (
        "[Errno 13] Permission denied · could not open the image a b.png")
    assert status_line("/in/photos/a.png: not an image") == "Not an image · a.png"
    assert status_line("Could not write C:\\out\\labels.png: no such folder") == (
        "No such folder · could not write labels.png")
    assert status_line("Open a model file first (File > Open model).") == (
        "Open a model file first (File > Open model).")


def test_urls_a_file_at_the_root_and_a_trailing_slash_are_left_whole() -> None:
    assert status_line("/a/b/net.onnx: see https://onnx.ai/onnx/operators/Resize.html: opset 9") == (
        "See https://onnx.ai/onnx/operators/Resize.html: opset 9 · net.onnx")
    assert status_line("/photo.png: 3/4 of the rows are blank") == "3/4 of the rows are blank · photo.png"
    assert status_line("Could not write /data/out/: permission denied") == "Permission denied · could not write out"
    assert for_the_app("no images in /d (looked for .png); pass --recursive to look in its sub-folders") == (
        "no images in /d (looked for .png); tick Include sub-folders to look in its sub-folders")
    assert for_the_app("--device-map is not --device") == "--device-map is not Device"


def test_only_paths_are_quoted_not_a_relative_name_that_is_also_a_word() -> None:
    from leanseg.gui.batch.texts import quote_paths

    assert quote_paths("images in it are kept", ("in", "out")) == "images in it are kept"
    assert quote_paths("input folder /a/does not exist does not exist", ("/a/does not exist",)) == (
        'input folder "/a/does not exist" does not exist')
