"""What the main window says about an image and a finished job, in words a user can check.

Three memory figures meet on one screen: the job's peak (process RSS on the CPU, CUDA allocated on a GPU), the
memory panel's peak allocated (what the allocator handed out) and the plan's estimated tensor peak (the engine's
live tensors in one pass, before it ran). The texts name which is which, and the tooltips say what each counts.
"""
from __future__ import annotations

from leanseg.core.io.images import ImageData, has_transparency
from leanseg.core.memory import format_bytes, peak_label
from leanseg.core.predict import Segmentation

ALPHA_IGNORED = "alpha channel ignored: transparent pixels are shown and segmented with their stored colour"  # the
# app's wording of core.io.images.ALPHA_IGNORED: here the image is shown as well
CPU_PEAK_TIP = (
    "Job peak, process RSS: the most memory the whole app process held (resident set: Python, Qt, PyTorch's "
    "libraries, the model's weights, the image and every tensor) while this job ran; (+N) is how far it rose "
    "above where it was when the job began. The Memory panel's 'peak allocated' counts only the bytes the heap "
    "allocator handed out, so it is lower; the plan line's 'estimated tensor peak' is the engine's forecast of its "
    "own live tensors in one pass (the part the memory budget limits), lower still."
)
CUDA_PEAK_TIP = (
    "Job peak, CUDA allocated: the most GPU memory PyTorch's tensors held while this job ran "
    "(torch.cuda.max_memory_allocated); (+N) is how far it rose above where it was when the job began. "
    "Memory the caching allocator keeps but does not use ('reserved') is not counted."
)


def image_notes(image: ImageData) -> list[str]:
    """Short notes on how the image is shown and segmented that the user would not otherwise know."""
    return [ALPHA_IGNORED] if has_transparency(image) else []


def job_peak_text(result: Segmentation) -> tuple[str, str]:
    """('job peak process RSS 658.6 MB (+32.3 MB)', tooltip saying what that counts)."""
    cpu = peak_label(result.peak_device or result.device) == "process peak"
    text = f"job peak {'process RSS' if cpu else 'CUDA allocated'} {format_bytes(result.peak_bytes)}"
    if result.start_bytes:  # how far it rose during this job: the part the image and its tiles took
        text += f" (+{format_bytes(result.peak_bytes - result.start_bytes)})"
    return text, CPU_PEAK_TIP if cpu else CUDA_PEAK_TIP
