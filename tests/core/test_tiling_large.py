"""Large pictures: memory-mapped TIFF in, memory-mapped label TIFF out, tile by tile."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import tifffile

from leanseg.core.cli import main
from leanseg.core.events import JobCancelled, JobEvent
from leanseg.core.io.images import ImageReadError, read_image
from leanseg.core.io.large import create_label_tiff, mappable_tiff, open_large_tiff
from leanseg.core.jobs import segment_large, segment_large_tiff

from .tiling_samples import cpu_segmenter

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def big_tiff(tmp_path: Path) -> Path:
    pixels = np.random.default_rng(4).integers(0, 256, (110, 150, 3), dtype=np.uint8)
    path = tmp_path / "scan.tif"
    tifffile.imwrite(path, pixels, photometric="rgb")
    return path


def test_mappable_tiffs_are_recognised(tmp_path: Path, big_tiff: Path) -> None:
    mapped = mappable_tiff(big_tiff)
    assert mapped is not None and mapped.shape == (110, 150, 3)
    assert np.array_equal(mapped.read(10, 50, 20, 90), tifffile.imread(big_tiff)[10:50, 20:90])
    pixels = tifffile.imread(big_tiff)
    tifffile.imwrite(tmp_path / "zip.tif", pixels, compression="zlib")
    tifffile.imwrite(tmp_path / "planar.tif", np.moveaxis(pixels, -1, 0), photometric="rgb", planarconfig="separate")
    (tmp_path / "fake.tif").write_bytes(b"not a tiff at all")
    for name in ("zip.tif", "planar.tif", "fake.tif"):
        assert mappable_tiff(tmp_path / name) is None, name
    with pytest.raises(ImageReadError, match="memory map"):
        open_large_tiff(tmp_path / "zip.tif")
    with pytest.raises(ImageReadError, match="exceeds the limit of 10,000 pixels"):
        open_large_tiff(big_tiff, max_pixels=10_000)


def test_label_tiff_written_through_the_map(tmp_path: Path) -> None:
    labels = create_label_tiff(tmp_path / "labels.tif", 70, 90)
    labels.write(32, 16, np.full((20, 30), 7, np.uint8))
    stored = tifffile.imread(tmp_path / "labels.tif")
    assert stored.shape == (70, 90) and stored.dtype == np.uint8
    assert (stored[32:52, 16:46] == 7).all() and stored.sum() == 7 * 600


def test_large_tiff_segmented_tile_by_tile_equals_in_memory(unet_checkpoint: Path, big_tiff: Path,
                                                            tmp_path: Path) -> None:
    reference = cpu_segmenter(unet_checkpoint, tiling="off").segment(read_image(big_tiff)).labels
    events: list[JobEvent] = []
    out = tmp_path / "out" / "scan_labels.tif"
    result = segment_large_tiff(big_tiff, out, cpu_segmenter(unet_checkpoint, memory_budget=1_000_000),
                                on_event=events.append)
    assert result.labels_path == out and (result.height, result.width) == (110, 150)
    assert np.array_equal(tifffile.imread(out), reference)
    plan = next(e for e in events if e.kind == "plan")
    assert plan.data["mode"] == "exact" and len([e for e in events if e.kind == "tile"]) == plan.count > 1
    assert sorted(p.name for p in out.parent.iterdir()) == ["scan_labels.tif"]


def test_cancel_leaves_no_output(unet_checkpoint: Path, big_tiff: Path, tmp_path: Path) -> None:
    cancel = threading.Event()

    def on_event(event: JobEvent) -> None:
        if event.kind == "tile":
            cancel.set()

    out_dir = tmp_path / "out"
    with pytest.raises(JobCancelled):
        segment_large_tiff(big_tiff, out_dir / "scan_labels.tif",
                           cpu_segmenter(unet_checkpoint, memory_budget=1_000_000), cancel=cancel, on_event=on_event)
    assert list(out_dir.iterdir()) == []


def test_cli_segment_maps_a_large_tiff(unet_checkpoint: Path, big_tiff: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(segment_large, "MEMMAP_MIN_PIXELS", 100 * 100)  # this small TIFF counts as large
    out = tmp_path / "out"
    code = main(["segment", str(big_tiff), "--out", str(out), "--model", str(unet_checkpoint), "--device", "cpu",
                 "--engine", "eager", "--memory-budget", "2MB"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "tiling exact" in printed and "halo 28 px" in printed
    labels = tifffile.imread(out / "scan_labels.tif")
    assert np.array_equal(labels, cpu_segmenter(unet_checkpoint, tiling="off").segment(read_image(big_tiff)).labels)
