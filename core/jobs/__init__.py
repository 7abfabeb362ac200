"""Jobs shared by the CLI and the GUI: plain functions with a cancel event and an event sink."""
from .segment_files import FileResult, JobSummary, segment_files

__all__ = ["FileResult", "JobSummary", "segment_files"]
