"""Which stored value is white: how the values of a file that is not plain 8- or 16-bit become the model's 0..1.

A model trained on photos sees pixel / white. Plain 8-bit data has white 255; a 16-bit file from a 12-bit camera
holds values up to 4095, so with white 65535 the model would see a nearly black picture while the viewer (which
stretches by percentiles) shows it well exposed. Each rule here is said in the image's note, so a user sees what
was assumed.
"""
from __future__ import annotations

import numpy as np

SENSOR_BITS = (12, 14, 16)  # the depths cameras commonly store in 16-bit files (8 and 10 left out: a dim frame of
# a 12-bit camera would be read 4-16x brighter than the camera's other frames)
FLOAT_PERCENTILES = (0.1, 99.9)  # a float image with no known scale is stretched between these
READING_RULES = "2"  # these rules' version, recorded by a batch so that a resume after they change is refused:
# bump it when a stored value would read differently (2: sensor whites, floats by percentile; 1: white 65535)


def sensor_white(largest: int) -> int:
    """The white of 16-bit data whose largest value is `largest`: 2^b - 1 for the fewest sensor bits b that hold
    it (4095 for a 12-bit camera's values, 65535 when the top bits are used)."""
    return next((2**bits - 1 for bits in SENSOR_BITS if largest <= 2**bits - 1), 65535)


def white_note(white: int, largest: int) -> str:
    """What the note says of a 16-bit image read with a white below 65535 ("" at 65535, and for 8-bit data: 0)."""
    if not white or white >= 65535:
        return ""
    return f"{white.bit_length()}-bit values (largest {largest}): {white} is white"


def choose_white(largest: int, declared: int = 0) -> tuple[int, str]:
    """(white, what the note says) of 16-bit data whose largest colour value is `largest`: the white the file
    declares (a TIFF's MaxSampleValue; 0: none), else `sensor_white`."""
    if declared:
        return declared, f"{declared} is white, as the file's MaxSampleValue says"
    white = sensor_white(largest)
    return white, white_note(white, largest)


def to_uint16(pixels: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Pixels of any other numeric type -> uint16 with 65535 as white, and notes saying how.

    Integers that fit 0..65535 are kept as they are (the 16-bit rules then apply); other integers are stretched
    from their smallest to their largest value. Floats: values that are not finite are read as 0; then 0..1 data
    (most of it: the 99.9th percentile, so a hot pixel does not darken the rest) is read with 1 as white,
    0..255 data with 255, anything else stretched between its 0.1th and 99.9th percentiles; values outside are
    clipped."""
    if pixels.dtype == bool:
        return pixels.astype(np.uint16) * 65535, []
    if np.issubdtype(pixels.dtype, np.integer):
        low, high = int(pixels.min()), int(pixels.max())
        if low >= 0 and high <= 65535:
            return pixels.astype(np.uint16), []
        if high == low:
            return np.zeros(pixels.shape, np.uint16), [f"every value {low}: read as 0"]
        stretched = (pixels.astype(np.float64) - low) * (65535.0 / (high - low))
        return stretched.astype(np.uint16), [f"values {low}..{high} stretched to 0..65535"]
    values = pixels.astype(np.float32)  # float16 and float64 too; a copy the rest works in, in place
    notes = []
    finite = np.isfinite(values)
    if not finite.all():
        notes.append(f"{int(values.size - finite.sum()):,} values not finite (NaN or infinity) read as 0")
        values[~finite] = 0.0
    bottom, top = (float(v) for v in np.percentile(values[:: max(1, values.shape[0] // 512)], FLOAT_PERCENTILES))
    smallest = float(values.min())
    if smallest >= 0 and top <= 1.0:
        black, white, said = 0.0, 1.0, "read as 0..1"
    elif smallest >= 0 and top <= 255.0:
        black, white, said = 0.0, 255.0, "read as 0..255"
    else:
        black, white = bottom, max(top, bottom + float(np.finfo(np.float32).eps))
        first, last = FLOAT_PERCENTILES
        said = f"stretched from {black:g}..{white:g} (their {first:g}-{last:g}th percentiles)"
    clipped = int(np.count_nonzero((values < black) | (values > white)))
    notes.insert(0, f"values {smallest:g}..{float(values.max()):g} {said}"
                 + (f", {clipped:,} values clipped" if clipped else ""))
    values -= black
    values *= 65535.0 / (white - black)
    np.clip(values, 0, 65535, out=values)
    return np.rint(values).astype(np.uint16), notes
