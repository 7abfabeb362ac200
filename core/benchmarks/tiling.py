"""`leanseg bench --sizes 1024,2048,4096,8192`: peak memory and time per megapixel against image size.

Configurations, each in its own subprocess: eager whole image, engine whole image (where they
fit in a quarter of the available memory), engine tiled exact and fast under --tile-budget.
The input image (a CamVid sample scaled up) is made after the probe starts, so the peak
includes the input and output arrays. `--agreement N` compares tiled with whole-image
logits at N x N. `--large-tiff N` segments an N x N uncompressed TIFF from a memory map, in a
child with glibc's default malloc (the peak RSS a user's process reaches, not just live bytes).
Writes bench_tiling.json and bench_tiling.png.
"""
from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

import psutil

from ..assets import default_model_path
from ..io.images import ImageData
from ..memory import format_bytes, parse_bytes
from ..plotting import line_chart
from ..predict import InferenceOptions, Segmenter
from .bench_inputs import load_bench_model, scaled_image
from .measure import Probe, run_case
from .report import format_table, write_json

SAMPLE = Path(__file__).resolve().parents[2] / "assets" / "samples" / "camvid_0016E5_07959.png"
CONFIGURATIONS = {  # name -> (engine, tiling mode, uses --tile-budget)
    "eager whole": ("eager", "off", False),
    "engine whole": ("lean", "off", False),
    "engine tiled exact": ("lean", "exact", True),
    "engine tiled fast": ("lean", "fast", True),
}
WHOLE_SHARE_OF_AVAILABLE = 0.25  # whole-image runs are skipped when their estimate exceeds this share


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("--sizes")
    group.add_argument("--tile-budget", type=parse_bytes, default=parse_bytes("512MB"), metavar="SIZE",
                       help="memory budget of the tiled runs (default 512MB)")
    group.add_argument("--tile-model", type=Path, default=None,
                       help="a .safetensors checkpoint, .pt2, .onnx or .leanseg; default: the shipped model, "
                            "else a random-init MobileUNet(11, 0.75)")
    group.add_argument("--tile-image", type=Path, default=SAMPLE, help="picture scaled up to each size")
    group.add_argument("--agreement", type=int, default=2048, metavar="N",
                       help="compare tiled and whole-image logits at N x N (0: skip; default 2048)")
    group.add_argument("--agreement-budget", type=parse_bytes, default=parse_bytes("160MB"), metavar="SIZE",
                       help="budget of the --agreement run, small enough to tile (default 160MB: 2x2 tiles at 2048)")
    group.add_argument("--fast-halos", default="64,128,192", metavar="PX,PX,...",
                       help="fast-mode halos compared in the --agreement run (default 64,128,192)")
    group.add_argument("--large-tiff", type=int, default=0, metavar="N",
                       help="also segment an N x N uncompressed TIFF from a memory map (0: skip)")
    group.add_argument("--large-tiling", default="auto", choices=("auto", "exact", "fast"),
                       help="tiling mode of the --large-tiff run (default auto)")
    group.add_argument("--large-max-tiles", type=int, default=0, metavar="K",
                       help="stop the --large-tiff run after K tiles (0: segment it all)")
    group.add_argument("--large-dir", type=Path, default=Path("/tmp"), help="where the large TIFF is written")
    group.add_argument("--configs", default=",".join(CONFIGURATIONS),
                       help="comma-separated subset of: " + ", ".join(CONFIGURATIONS))


def segment_case(probe: Probe, size: int, engine: str, tiling: str, budget: int | None, model: str | None,
                 image: str, repeats: int, device: str = "cpu") -> dict[str, Any]:
    """Peak (input and output arrays included) and median seconds of Segmenter.segment at size x size."""
    options = InferenceOptions(device=device, engine=engine, tiling=tiling, memory_budget=budget)
    segmenter = Segmenter(load_bench_model(model), options)
    segmenter.segment(ImageData(scaled_image(image, 256)))  # warm-up: kernels, estimators
    probe.start()
    events: list[Any] = []
    pixels = scaled_image(image, size)
    result = segmenter.segment(ImageData(pixels), on_event=events.append)
    peak = probe.peak_bytes()
    times = [result.seconds] + [segmenter.segment(ImageData(pixels)).seconds for _ in range(repeats - 1)]
    tiles = [e for e in events if e.kind == "tile"]
    return {"peak_bytes": peak, "seconds": statistics.median(times), "runs": len(times),
            "plan": result.notes[0] if result.notes else "", "tiles": len(tiles),
            "tile_live_bytes": max((e.live_bytes or 0 for e in tiles), default=0)}


def estimate_whole_case(probe: Probe, size: int, engine: str, model: str | None, device: str = "cpu") -> dict[str, Any]:
    """The plan's (or the eager fallback's) estimate for a whole-image run, without running it."""
    from ..segment_tiled import estimate_tile_bytes

    segmenter = Segmenter(load_bench_model(model), InferenceOptions(device=device, engine=engine))
    return {"estimate_bytes": estimate_tile_bytes(segmenter, size, size, output="labels"), "peak_bytes": 0}


def run(args: argparse.Namespace) -> int:
    sizes = [int(s) for s in str(args.sizes).split(",") if s.strip() and int(s) > 0]
    model = str(args.tile_model) if args.tile_model else None
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in configs if c not in CONFIGURATIONS]
    if unknown:
        print(f"leanseg: error: unknown configuration(s) {unknown}; valid: {', '.join(CONFIGURATIONS)}")
        return 2
    model_name = model or (str(default_model_path()) if default_model_path().is_file()
                           else "random-init MobileUNet(num_classes=11, width=0.75)")
    rows: list[dict[str, Any]] = []
    for size in sizes:
        repeats = 1 if args.quick or size > 2048 else 3
        for name in configs:
            engine, tiling, budgeted = CONFIGURATIONS[name]
            row: dict[str, Any] = {"size": size, "MP": round(size * size / 1e6, 2), "configuration": name}
            if not budgeted:
                estimate = run_case(f"{__name__}:estimate_whole_case", {
                    "size": size, "engine": engine, "model": model, "device": args.device}, threads=args.threads)
                limit = WHOLE_SHARE_OF_AVAILABLE * psutil.virtual_memory().available
                if "error" in estimate or estimate["estimate_bytes"] > limit:
                    rows.append({**row, "plan": f"skipped: estimate {format_bytes(estimate.get('estimate_bytes', 0))}"
                                                f" > {format_bytes(limit)}"})
                    continue
            print(f"{size}x{size}: {name} ...", flush=True)
            result = run_case(f"{__name__}:segment_case", {
                "size": size, "engine": engine, "tiling": tiling, "budget": args.tile_budget if budgeted else None,
                "model": model, "image": str(args.tile_image), "repeats": repeats, "device": args.device},
                threads=args.threads, timeout=3600)
            rows.append(_row(row, result))
            write_json(Path(args.out) / "bench_tiling_partial.json", rows)  # survives an interrupted run
    _add_ratios(rows)
    columns = ["size", "configuration", "peak", "s/MP", "x whole@1024 s/MP", "runs", "tiles", "plan"]
    print(f"\nModel {model_name}; {args.threads} threads, {args.device}; tiled budget "
          f"{format_bytes(args.tile_budget)}; peak above baseline, input and output arrays included:\n")
    print(format_table(rows, columns))
    payload: dict[str, Any] = {"model": model_name, "threads": args.threads, "device": args.device,
                               "tile_budget": args.tile_budget, "rows": rows}
    if args.agreement:
        print(f"\nagreement at {args.agreement}x{args.agreement}, budget {format_bytes(args.agreement_budget)} ...",
              flush=True)
        agreement = run_case(f"{__name__}_agreement:agreement_case", {
            "size": args.agreement, "budget": args.agreement_budget, "model": model, "image": str(args.tile_image),
            "device": args.device, "halos": [int(h) for h in args.fast_halos.split(",") if h.strip()]},
            threads=args.threads, timeout=3600)
        payload["agreement"] = agreement
        print(format_table(agreement.get("rows", [{"mode": "error", "note": agreement.get("error")}]),
                           ["mode", "halo px", "tiles", "labels agree", "max |logit diff|", "differing labels",
                            "of which decided", "note"]))
    if args.large_tiff:
        payload["large_tiff"] = _run_large(args, model)
    out = Path(args.out)
    json_path = write_json(out / "bench_tiling.json", payload)
    plot_path = _plot(rows, out / "bench_tiling.png") if rows else None
    print(f"\nwritten {json_path}" + (f", {plot_path}" if plot_path else ""))
    return 0 if all("error" not in str(r.get("plan", "")) for r in rows) else 1


def _run_large(args: argparse.Namespace, model: str | None) -> dict[str, Any]:
    from .tiling_large import make_large_tiff

    size = args.large_tiff
    path = Path(args.large_dir) / f"leanseg_bench_{size}.tif"
    print(f"\nwriting {path} ({format_bytes(size * size * 3)}) ...", flush=True)
    make_large_tiff(path, size, str(args.tile_image))
    try:
        print(f"segmenting {size}x{size} from the memory map ...", flush=True)
        result = run_case(f"{__name__}_large:large_tiff_case", {
            "path": str(path), "budget": args.tile_budget, "tiling": args.large_tiling,
            "max_tiles": args.large_max_tiles, "model": model, "device": args.device},
            threads=args.threads, timeout=4 * 3600, user_malloc=True)  # glibc's defaults: the RSS a user sees
    finally:
        path.unlink(missing_ok=True)
    if "error" not in result:
        result["peak"] = format_bytes(result["peak_bytes"])
        print(format_table([{"size": size, **result}], ["size", "peak", "tiles_done", "tiles", "finished",
                                                        "megapixels_done", "s/MP", "plan"]))
    else:
        print(f"error: {result['error']}")
    return result


def _row(row: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    if "error" in result:
        return {**row, "plan": f"error: {result['error']}"}
    megapixels = row["size"] ** 2 / 1e6
    return {**row, "peak": format_bytes(result["peak_bytes"]), "peak_bytes": result["peak_bytes"],
            "seconds": result["seconds"], "s/MP": round(result["seconds"] / megapixels, 3), "runs": result["runs"],
            "tiles": result["tiles"], "plan": result["plan"]}


def _add_ratios(rows: list[dict[str, Any]]) -> None:
    reference = next((r["s/MP"] for r in rows if r["size"] == 1024 and r["configuration"] == "engine whole"
                      and "s/MP" in r), None)
    for row in rows:
        if reference and "s/MP" in row:
            row["x whole@1024 s/MP"] = round(row["s/MP"] / reference, 2)


def _plot(rows: list[dict[str, Any]], path: Path) -> Path:
    series = {}
    for name in CONFIGURATIONS:
        points = [(r["MP"], r["peak_bytes"] / 1e6) for r in rows if r["configuration"] == name and "peak_bytes" in r]
        if points:
            series[name] = ([p[0] for p in points], [p[1] for p in points])
    return line_chart(series, path, title="Peak memory against image size", x_label="megapixels",
                      y_label="peak above baseline (MB)", hlines=[(1500.0, "1.5 GB bar")])
