"""Issue 16's "done when" for the public zoo: leanseg's labels equal eager PyTorch's.

For every zoo model (NAME.pt2 and NAME.onnx with NAME.json) this runs the `leanseg` CLI through
`segment`, `batch` and `video` on a 360x480 CamVid frame (not a multiple of 32), the same frame
resized to 1024x1024 and a 4-frame mp4v clip, and counts the label pixels equal to eager PyTorch's:
`torch.export.load(NAME.pt2).module()` under no_grad in the zoo's venv, fed exactly what leanseg
feeds its model (RGB / 255, card mean/std, zeros padded bottom-right to the card's size_multiple,
logits cropped back), argmax over classes. Video frames are decoded as leanseg decodes them
(cv2.VideoCapture with CAP_FFMPEG, BGR -> RGB), and the reference is computed on those frames.

    .venv/bin/python scripts/check_zoo_models.py out/zoo --out out/zoo_check

Prints one row per model, format, path and size; writes OUT/results.json; exits 1 on any mismatch.
The reference step is this file run with --reference by .venv-zoo/bin/python (needs torch, numpy).
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "assets" / "samples" / "camvid_0016E5_07959.png"
LEANSEG = ROOT / ".venv" / "bin" / "leanseg"
ZOO_PYTHON = ROOT / ".venv-zoo" / "bin" / "python"
FORMATS = ("pt2", "onnx")
VIDEO_FRAMES = 4


# ---- inputs (project venv: cv2) ----------------------------------------------------------------

def make_images(folder: Path) -> dict[str, Path]:
    """The 360x480 sample and its 1024x1024 INTER_LINEAR resize, as PNGs in `folder`."""
    import cv2

    folder.mkdir(parents=True, exist_ok=True)
    bgr = cv2.imread(str(SAMPLE), cv2.IMREAD_COLOR)  # (360, 480, 3)
    images = {"camvid_360x480": bgr,
              "camvid_1024x1024": cv2.resize(bgr, (1024, 1024), interpolation=cv2.INTER_LINEAR)}
    paths = {}
    for stem, pixels in images.items():
        paths[stem] = folder / f"{stem}.png"
        cv2.imwrite(str(paths[stem]), pixels)
    return paths


def make_video(path: Path) -> Path:
    """VIDEO_FRAMES copies of the 360x480 sample, mp4v at 10 fps."""
    import cv2

    path.parent.mkdir(parents=True, exist_ok=True)
    bgr = cv2.imread(str(SAMPLE), cv2.IMREAD_COLOR)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10.0, (bgr.shape[1], bgr.shape[0]))
    for k in range(VIDEO_FRAMES):
        writer.write(np.roll(bgr, 8 * k, axis=1))  # shifted, so the frames differ
    writer.release()
    return path


def read_png_rgb(path: Path) -> np.ndarray:
    import cv2

    return cv2.cvtColor(cv2.imread(str(path), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)


def decode_video_like_leanseg(path: Path) -> list[np.ndarray]:
    """The RGB frames as leanseg.core.io.video.VideoReader decodes them."""
    import cv2

    capture = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG)
    frames = []
    while True:
        ok, bgr = capture.read()
        if not ok or bgr is None:
            break
        frames.append(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
    capture.release()
    return frames


def read_labels(path: Path) -> np.ndarray | None:
    import cv2

    return cv2.imread(str(path), cv2.IMREAD_UNCHANGED) if path.is_file() else None


# ---- reference (zoo venv: torch.export) ----------------------------------------------------------

def normalise_like_leanseg(rgb: np.ndarray, mean: list[float], std: list[float]) -> np.ndarray:
    """(H, W, 3) uint8 -> (3, H, W) float32, the same float32 steps as leanseg.core.io.images.to_model_input."""
    out = np.moveaxis(rgb, -1, 0).astype(np.float32)
    out *= 1.0 / 255.0
    out -= np.asarray(mean, np.float32)[:, None, None]
    out /= np.asarray(std, np.float32)[:, None, None]
    return out


def eager_labels_and_margins(module, chw: np.ndarray, multiple: int) -> tuple[np.ndarray, np.ndarray]:
    """Zero-pad bottom-right to `multiple` (leanseg.core.model.padding), run, crop, argmax.

    Also returns the top-1 minus top-2 logit per pixel, to tell near-ties from real differences."""
    import torch
    import torch.nn.functional as F

    x = torch.from_numpy(chw)[None]  # (1, 3, H, W)
    height, width = x.shape[-2:]
    padded = F.pad(x, (0, (-width) % multiple, 0, (-height) % multiple))
    with torch.no_grad():
        logits = module(padded)[..., :height, :width]  # (1, K, H, W)
        top2 = logits.topk(2, dim=1).values[0]  # (2, H, W)
        labels = logits.argmax(dim=1)[0].to(torch.uint8)  # (H, W)
    return labels.numpy(), (top2[0] - top2[1]).numpy()


def write_reference(zoo: Path, name: str, inputs: Path, out: Path) -> None:
    """NAME.npz under `out`: KEY (labels, uint8) and KEY_margin for every RGB array in `inputs`."""
    import torch

    torch.set_num_threads(2)
    card = json.loads((zoo / f"{name}.json").read_text())["input"]
    module = torch.export.load(str(zoo / f"{name}.pt2")).module()
    arrays = {}
    with np.load(inputs) as images:
        for key in images.files:
            chw = normalise_like_leanseg(images[key], card["mean"], card["std"])
            arrays[key], arrays[f"{key}_margin"] = eager_labels_and_margins(module, chw, card["size_multiple"])
    np.savez(out / f"{name}.npz", **arrays)


def compute_references(zoo: Path, names: list[str], rgb: dict[str, np.ndarray], out: Path) -> dict[str, Path]:
    """Run the reference in the zoo venv, one process per model; returns NAME -> NAME.npz."""
    out.mkdir(parents=True, exist_ok=True)
    inputs = out / "inputs.npz"
    np.savez(inputs, **rgb)
    for name in names:
        print(f"reference: {name} (eager, .venv-zoo)", flush=True)
        subprocess.run(["nice", "-n", "10", str(ZOO_PYTHON), __file__, "--reference", str(zoo), name,
                        str(inputs), str(out)], check=True)
    return {name: out / f"{name}.npz" for name in names}


# ---- leanseg CLI runs ----------------------------------------------------------------------------

def run_leanseg(args: list[str], log: Path) -> bool:
    """`leanseg ARGS` niced; stdout and stderr to `log`; True when it exits 0."""
    result = subprocess.run(["nice", "-n", "10", str(LEANSEG), *args], capture_output=True, text=True)
    log.write_text(f"$ leanseg {' '.join(args)}\n{result.stdout}{result.stderr}exit {result.returncode}\n")
    if result.returncode != 0:
        print(f"  leanseg {args[0]} failed (exit {result.returncode}), see {log}", flush=True)
    return result.returncode == 0


def fresh_dir(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def run_segment(model: Path, images: dict[str, Path], out: Path) -> dict[str, np.ndarray | None]:
    """One `leanseg segment IMAGE` per image; stem -> labels."""
    labels = {}
    for stem, image in images.items():
        folder = fresh_dir(out / stem)
        run_leanseg(["segment", str(image), "--model", str(model), "--out", str(folder), "--no-overlay"],
                    folder / "log.txt")
        labels[stem] = read_labels(folder / f"{stem}_labels.png")
    return labels


def run_batch(model: Path, image_folder: Path, out: Path) -> dict[str, np.ndarray | None]:
    """`leanseg batch FOLDER`; stem -> labels."""
    folder = fresh_dir(out)
    run_leanseg(["batch", str(image_folder), "--model", str(model), "--out", str(folder / "labels"),
                 "--no-overlay"], folder / "log.txt")
    return {image.stem: read_labels(folder / "labels" / f"{image.stem}_labels.png")
            for image in sorted(image_folder.glob("*.png"))}


def run_video(model: Path, video: Path, out: Path) -> dict[str, np.ndarray | None]:
    """`leanseg video --labels-dir`; 'frame_K' -> labels, for the frames leanseg wrote."""
    folder = fresh_dir(out)
    run_leanseg(["video", str(video), "--model", str(model), "--out", str(folder / "overlay.mp4"),
                 "--labels-dir", str(folder / "labels"), "--no-overlay", "--no-csv"], folder / "log.txt")
    labels = {}
    for png in sorted((folder / "labels").glob("*_labels.png")):
        index = int(re.search(r"_(\d+)_labels\.png$", png.name).group(1))
        labels[f"frame_{index}"] = read_labels(png)
    return labels


# ---- comparison ----------------------------------------------------------------------------------

def compare(got: np.ndarray | None, reference: np.ndarray, margin: np.ndarray) -> dict:
    """Pixels equal, and for the others the largest eager top-1 minus top-2 logit (near 0: a near-tie)."""
    if got is None or got.shape != reference.shape:
        return {"ok": False, "pixels": int(reference.size), "equal": 0,
                "error": "no labels PNG" if got is None else f"shape {got.shape} != {reference.shape}"}
    differ = got != reference
    return {"ok": not differ.any(), "pixels": int(reference.size), "equal": int(reference.size - differ.sum()),
            "classes_ref": int(len(np.unique(reference))), "classes_got": int(len(np.unique(got))),
            "max_margin_where_differ": float(margin[differ].max()) if differ.any() else None}


def combine(rows: list[dict]) -> dict:
    """One result for several frames."""
    ok = all(r["ok"] for r in rows) and bool(rows)
    merged = {"ok": ok, "pixels": sum(r["pixels"] for r in rows), "equal": sum(r["equal"] for r in rows),
              "classes_ref": max((r.get("classes_ref", 0) for r in rows), default=0),
              "classes_got": max((r.get("classes_got", 0) for r in rows), default=0)}
    margins = [r["max_margin_where_differ"] for r in rows if r.get("max_margin_where_differ") is not None]
    merged["max_margin_where_differ"] = max(margins) if margins else None
    errors = [r["error"] for r in rows if "error" in r]
    if errors:
        merged["error"] = "; ".join(sorted(set(errors)))
    return merged


def check_model(zoo: Path, name: str, fmt: str, reference: Path, images: dict[str, Path], video: Path,
                frame_keys: list[str], out: Path) -> list[dict]:
    """Rows for one model file through segment, batch and video."""
    model = zoo / f"{name}.{fmt}"
    work = out / "runs" / f"{name}.{fmt}"
    rows = []
    with np.load(reference) as ref:
        for path, got in (("segment", run_segment(model, images, work / "segment")),
                          ("batch", run_batch(model, images["camvid_360x480"].parent, work / "batch"))):
            for stem in images:
                size = "x".join(map(str, ref[stem].shape))
                rows.append({"model": name, "format": fmt, "path": path, "size": size,
                             **compare(got.get(stem), ref[stem], ref[f"{stem}_margin"])})
        got = run_video(model, video, work / "video")
        frames = [compare(got.get(key), ref[key], ref[f"{key}_margin"]) for key in frame_keys]
        if set(got) - set(frame_keys):
            frames.append({"ok": False, "pixels": 0, "equal": 0, "error": f"extra frames {sorted(got)}"})
        size = "x".join(map(str, ref[frame_keys[0]].shape)) + f" x{len(frame_keys)}"
        rows.append({"model": name, "format": fmt, "path": "video", "size": size, **combine(frames),
                     "frames": frames})
    return rows


def print_table(rows: list[dict]) -> None:
    head = f"{'model':30} {'fmt':5} {'path':8} {'size':14} {'equal %':>9} {'differ':>7} {'classes ref/got':>16}  note"
    print(head)
    print("-" * len(head))
    for r in rows:
        classes = f"{r.get('classes_ref', '-')}/{r.get('classes_got', '-')}"
        note = r.get("error", "")
        if r.get("max_margin_where_differ") is not None:
            note = f"eager top1-top2 <= {r['max_margin_where_differ']:.2e} where they differ {note}".strip()
        print(f"{r['model']:30} {r['format']:5} {r['path']:8} {r['size']:14} "
              f"{100.0 * r['equal'] / max(r['pixels'], 1):9.4f} {r['pixels'] - r['equal']:7d} {classes:>16}  {note}")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--reference":  # run by .venv-zoo's python
        zoo, name, inputs, out = sys.argv[2:6]
        write_reference(Path(zoo), name, Path(inputs), Path(out))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("zoo", type=Path, help="folder with NAME.pt2, NAME.onnx and NAME.json")
    parser.add_argument("--out", type=Path, required=True, help="working folder; gets results.json")
    args = parser.parse_args()
    zoo, out = args.zoo.resolve(), args.out.resolve()
    names = sorted(p.stem for p in zoo.glob("*.pt2"))

    images = make_images(out / "images")
    video = make_video(out / "video" / "clip.mp4")
    frames = decode_video_like_leanseg(video)
    rgb = {stem: read_png_rgb(path) for stem, path in images.items()}
    frame_keys = [f"frame_{k}" for k in range(len(frames))]
    rgb.update(zip(frame_keys, frames))
    references = compute_references(zoo, names, rgb, out / "reference")

    rows = []
    for name in names:
        for fmt in FORMATS:
            print(f"leanseg: {name}.{fmt}", flush=True)
            rows += check_model(zoo, name, fmt, references[name], images, video, frame_keys, out)
    print_table(rows)
    (out / "results.json").write_text(json.dumps(rows, indent=1))
    failed = [r for r in rows if not r["ok"]]
    print(f"\n{len(rows) - len(failed)} of {len(rows)} rows equal; results in {out / 'results.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
