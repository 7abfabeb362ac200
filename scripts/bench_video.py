"""Benchmark `leanseg video` end to end: frames/s at 360x480 per engine and precision, flat memory.

    .venv/bin/python scripts/bench_video.py [--model M] [--frames 90] [--memory-frames 300] [--threads 2]

Input: the sample video (assets/samples/camvid_val.mp4, 101 CamVid frames at 360x480) played
forward and back into longer videos in /tmp. Each configuration (eager/lean x fp32/bf16) runs
`segment_video` (reader thread -> inference -> overlay + mp4 writer thread) over --frames frames in
its own subprocess with glibc's default malloc (as a user's process runs), after a warm-up, and reports:
- end-to-end frames/s: the median over three equal windows of the run, and over the whole run;
- inference alone: median of 10 `Segmenter.segment` calls on one decoded frame (the ceiling), and
  the tiler's planning time, which every `segment` call pays;
- memory: process peak (per-frame VmHWM windows and RSS sampled every 5 ms) after 30 frames and
  after all of them (glibc keeps freed blocks here, so these peaks run high). A separate --memory-frames run
  (MALLOC_MMAP_THRESHOLD_=65536, so RSS follows live bytes) of --memory-config gives the flat-memory bar:
  the peak after 300 frames within 5% of the peak after 30.
Label agreement (bf16 vs fp32 of the same engine, lean vs eager fp32) is measured in another
subprocess on every 2nd frame of the sample video. Bar: >= 12 frames/s end to end in a mode whose
labels agree with fp32 on >= 99.5% of pixels. Without --model, the shipped default model if present,
else a random-init MobileUNetConfig(num_classes=11, width=0.75) in /tmp (speed does not depend on
weights; agreement does, so measure it on the trained model).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "assets" / "samples" / "camvid_val.mp4"
CONFIGS = ("eager:fp32", "eager:bf16", "lean:fp32", "lean:bf16")


def _segmenter(model: str, engine: str, precision: str):  # type: ignore[no-untyped-def]
    from leanseg.core.model.checkpoint import load_checkpoint
    from leanseg.core.predict import InferenceOptions, Segmenter

    segmenter = Segmenter(load_checkpoint(model), InferenceOptions(device="cpu", engine=engine, precision=precision))
    used = "lean" if getattr(segmenter, "plan", None) is not None else "eager"  # what Segmenter actually runs
    return segmenter, used


def _rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class RssSampler:
    """Highest VmRSS seen, sampled on a thread every `interval_s`."""

    def __init__(self, interval_s: float = 0.005) -> None:
        self.max_bytes = _rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval_s,), daemon=True)
        self._thread.start()

    def _run(self, interval_s: float) -> None:
        while not self._stop.wait(interval_s):
            self.max_bytes = max(self.max_bytes, _rss_bytes())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def case_video(probe: Any, model: str, video: str, engine: str, precision: str, marks: list[int],
               warmup: int) -> dict[str, Any]:
    """One `segment_video` run; frame timestamps, peaks at `marks` frames, and the pure inference rate."""
    from leanseg.core.events import JobEvent
    from leanseg.core.io.images import ImageData
    from leanseg.core.io.video import VideoReader
    from leanseg.core.jobs import VideoJobOptions, segment_video
    from leanseg.core.segment_tiled import plan_tiles

    segmenter, used = _segmenter(model, engine, precision)
    with VideoReader(video) as reader:
        frames = [f.rgb for _, f in zip(range(warmup), reader)]
    for rgb in frames:
        segmenter.segment(ImageData(rgb))
    baseline = _rss_bytes()
    stamps: list[float] = []
    frame_peak = [0]
    peaks_at: dict[str, int] = {}
    sampler = RssSampler()

    def on_event(event: JobEvent) -> None:
        if event.kind == "start":
            stamps.append(time.perf_counter())
        elif event.kind == "frame":
            stamps.append(time.perf_counter())
            frame_peak[0] = max(frame_peak[0], int(event.data["peak_bytes"]))
            if len(stamps) - 1 in marks:
                peaks_at[str(len(stamps) - 1)] = max(frame_peak[0], sampler.max_bytes)

    with tempfile.TemporaryDirectory(prefix="leanseg_bench_video_") as out:
        summary = segment_video(Path(video), Path(out) / "out.mp4", segmenter, VideoJobOptions(), on_event=on_event)
    sampler.stop()
    peaks_at[str(summary.frames_done)] = max(frame_peak[0], sampler.max_bytes)
    third = summary.frames_done // 3
    windows = [third / (stamps[(k + 1) * third] - stamps[k * third]) for k in range(3)] if third else []
    pure = []
    for _ in range(10):
        pure.append(segmenter.segment(ImageData(frames[0])).seconds)
    planning = []  # the tiler's per-call planning (budget estimate), part of every segment() call
    height, width = frames[0].shape[:2]
    for _ in range(10):
        begin = time.perf_counter()
        plan_tiles(segmenter, height, width, "labels")
        planning.append(time.perf_counter() - begin)
    return {
        "engine_used": used, "frames": summary.frames_done, "fps_windows": windows,
        "fps_median": statistics.median(windows) if windows else summary.fps, "fps_overall": summary.fps,
        "infer_ms": 1000 * summary.infer_seconds / max(summary.frames_done, 1),
        "pure_fps": 1.0 / statistics.median(pure), "plan_ms": 1000 * statistics.median(planning),
        "baseline_bytes": baseline, "peaks_at": peaks_at,
        "peak_bytes": max(peaks_at.values()),
    }


def case_agreement(probe: Any, model: str, video: str, every: int) -> dict[str, Any]:
    """Pixel agreement of labels between configurations on every `every`th frame of `video`."""
    import numpy as np

    from leanseg.core.io.images import ImageData
    from leanseg.core.io.video import VideoReader

    segmenters = {name: _segmenter(model, *name.split(":"))[0] for name in CONFIGS}
    pairs = {"eager:bf16 vs eager:fp32": ("eager:bf16", "eager:fp32"),
             "lean:bf16 vs lean:fp32": ("lean:bf16", "lean:fp32"),
             "lean:fp32 vs eager:fp32": ("lean:fp32", "eager:fp32")}
    same = dict.fromkeys(pairs, 0)
    worst = dict.fromkeys(pairs, 1.0)
    pixels = frames = 0
    with VideoReader(video, every=every) as reader:
        for frame in reader:
            labels = {name: seg.segment(ImageData(frame.rgb)).labels for name, seg in segmenters.items()}
            for pair, (a, b) in pairs.items():
                equal = int(np.count_nonzero(labels[a] == labels[b]))
                same[pair] += equal
                worst[pair] = min(worst[pair], equal / labels[a].size)
            pixels += frame.rgb.shape[0] * frame.rgb.shape[1]
            frames += 1
    return {"frames": frames, "agreement": {p: same[p] / pixels for p in pairs}, "worst_frame": worst,
            "peak_bytes": None}


def make_long_video(path: Path, frames: int) -> Path:
    """The sample video forward, backward, forward, ... for `frames` frames."""
    from leanseg.core.io.video import VideoReader, VideoReadError, probe_video
    from leanseg.core.io.video_writer import VideoWriter

    try:
        if probe_video(path).frame_count == frames:
            return path  # made by an earlier run
    except VideoReadError:
        pass
    with VideoReader(SAMPLE) as reader:
        clip = [f.rgb for f in reader]
        fps = reader.info.fps or 15.0
    cycle = clip + clip[-2:0:-1]
    with VideoWriter(path, fps, clip[0].shape[1], clip[0].shape[0]) as writer:
        for index in range(frames):
            writer.write(cycle[index % len(cycle)])
    return path


def default_model() -> str:
    from leanseg.core.assets import default_model_path
    from leanseg.core.benchmarks.bench_inputs import random_camvid_model

    if default_model_path().is_file():
        return str(default_model_path())
    return str(random_camvid_model(Path(tempfile.gettempdir()) / "leanseg_bench_video_random.safetensors"))


def _run_config(name: str, model: str, frames: int, threads: int, *, for_memory: bool = False) -> dict[str, Any]:
    """Speed runs use glibc's default malloc, as a user's process does; the memory run maps large blocks."""
    from leanseg.core.benchmarks.measure import run_case

    engine, precision = name.split(":")
    video = make_long_video(Path(tempfile.gettempdir()) / f"leanseg_bench_video_{frames}.mp4", frames)
    marks = [m for m in (30, frames) if m <= frames]
    result = run_case("bench_video:case_video", {"model": model, "video": str(video), "engine": engine,
                                                  "precision": precision, "marks": marks, "warmup": 5},
                      threads=threads, timeout=7200, user_malloc=not for_memory)
    print(f"  {name}, {frames} frames: {result.get('fps_median', result.get('error'))} frames/s "
          f"(load {os.getloadavg()[0]:.1f})", flush=True)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="checkpoint (default: shipped model, else random init)")
    parser.add_argument("--frames", type=int, default=90, help="frames per speed run (default 90)")
    parser.add_argument("--memory-frames", type=int, default=300, help="frames of the memory run (0: none)")
    parser.add_argument("--memory-config", default="lean:fp32", help="configuration of the memory run")
    parser.add_argument("--memory-threads", type=int, default=None,
                        help="threads of the memory run (default --threads)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"default {','.join(CONFIGS)}")
    parser.add_argument("--rounds", type=int, default=1, help="repeat all configurations, alternating (default 1)")
    parser.add_argument("--agreement-every", type=int, default=2, help="agreement on every Nth sample frame")
    parser.add_argument("--no-agreement", action="store_true")
    parser.add_argument("--json", type=Path, default=ROOT / "out" / "bench" / "video.json")
    args = parser.parse_args()
    from leanseg.core.benchmarks.measure import run_case
    from leanseg.core.benchmarks.report import format_table, write_json
    from leanseg.core.memory import format_bytes

    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parent),
                                                             os.environ.get("PYTHONPATH")]))
    model = args.model or default_model()
    print(f"model {model}; {args.threads} threads; load {os.getloadavg()}")
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in args.configs.split(",") if name and name != "none"}
    for _ in range(args.rounds):
        for name in runs:
            runs[name].append(_run_config(name, model, args.frames, args.threads))
    memory_threads = args.memory_threads or args.threads
    memory_run = _run_config(args.memory_config, model, args.memory_frames, memory_threads, for_memory=True) \
        if args.memory_frames else None
    rows = []
    for name, results in runs.items():
        good = [r for r in results if "error" not in r]
        if not good:
            rows.append({"config": name, "error": results[0].get("error")})
            continue
        peaks = good[-1]["peaks_at"]
        first, last = peaks.get("30"), peaks.get(str(good[-1]["frames"]))
        rows.append({
            "config": name, "engine used": good[-1]["engine_used"], "frames": good[-1]["frames"],
            "e2e fps (median)": statistics.median(r["fps_median"] for r in good),
            "e2e fps (whole run)": statistics.median(r["fps_overall"] for r in good),
            "infer ms/frame": statistics.median(r["infer_ms"] for r in good),
            "infer-only fps": statistics.median(r["pure_fps"] for r in good),
            "planning ms": statistics.median(r["plan_ms"] for r in good),
            "peak @30": format_bytes(first) if first else None, "peak @end": format_bytes(last) if last else None,
            "growth %": 100.0 * (last - first) / first if first and last else None,
        })
    print(format_table(rows, ["config", "engine used", "frames", "e2e fps (median)", "e2e fps (whole run)",
                              "infer ms/frame", "infer-only fps", "planning ms", "peak @30", "peak @end", "growth %"]))
    if memory_run is not None and "error" not in memory_run:
        peaks = memory_run["peaks_at"]
        first, last = peaks["30"], peaks[str(memory_run["frames"])]
        print(f"flat memory, {args.memory_config}, {memory_threads} thread(s): peak after 30 frames "
              f"{format_bytes(first)}, after {memory_run['frames']} {format_bytes(last)} "
              f"({100 * (last - first) / first:+.2f}%; bar: within 5%), {memory_run['fps_overall']:.2f} frames/s")
    elif memory_run is not None:
        print(f"memory run: {memory_run['error']}")
    agreement = None
    if not args.no_agreement:
        agreement = run_case("bench_video:case_agreement", {"model": model, "video": str(SAMPLE),
                                                            "every": args.agreement_every},
                             threads=args.threads, timeout=3600)
        if "error" in agreement:
            print(f"agreement: {agreement['error']}")
        else:
            print(f"label agreement over {agreement['frames']} sample frames (all pixels; worst frame):")
            for pair, share in agreement["agreement"].items():
                print(f"  {pair}: {100 * share:.3f}% (worst {100 * agreement['worst_frame'][pair]:.3f}%)")
    path = write_json(args.json, {"model": model, "frames": args.frames, "threads": args.threads,
                                  "load_average": os.getloadavg(), "rows": rows, "runs": runs,
                                  "memory_config": args.memory_config, "memory_threads": memory_threads,
                                  "memory_run": memory_run,
                                  "agreement": agreement})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
