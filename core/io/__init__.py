"""Image, video and output I/O."""
from .images import IMAGE_SUFFIXES, ImageData, ImageReadError, read_image, to_model_input, to_rgb8
from .outputs import atomic_write_bytes, colourise, overlay, write_png

__all__ = [
    "IMAGE_SUFFIXES",
    "ImageData",
    "ImageReadError",
    "atomic_write_bytes",
    "colourise",
    "overlay",
    "read_image",
    "to_model_input",
    "to_rgb8",
    "write_png",
]
