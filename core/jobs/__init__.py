"""Jobs shared by the CLI and the GUI: plain functions with a cancel event and an event sink."""
from .batch import BatchSummary, model_fingerprint, run_batch
from .batch_plan import BatchSettings, ImageTask
from .manifest import ImageRecord, Manifest, ManifestError
from .segment_files import FileResult, JobSummary, segment_files
from .segment_large import LargeResult, is_large_tiff, segment_large_tiff
from .video import VideoJobOptions, VideoJobSummary, segment_video

__all__ = ["FileResult", "JobSummary", "VideoJobOptions", "VideoJobSummary", "segment_files", "segment_video"]
__all__ += ["BatchSettings", "BatchSummary", "ImageRecord", "ImageTask", "Manifest", "ManifestError",
            "model_fingerprint", "run_batch"]
__all__ += ["LargeResult", "is_large_tiff", "segment_large_tiff"]
