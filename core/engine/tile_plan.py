"""Where the tiles go: a grid of stride-aligned cores, each read with a halo, sized to a memory budget.

Of the grids whose largest tile fits the budget, the plan takes the one that reads the fewest pixels
(halos included): strips the full width of the image where they fit, since a strip has a halo on two
sides at most where a square tile inside the image has one on all four.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from ..memory import format_bytes

Box = tuple[int, int, int, int]  # (top, bottom, left, right): rows [top, bottom), columns [left, right)
TileBytes = Callable[[int, int], int]  # (tile rows, tile columns) -> predicted peak bytes for one tile

MODES = ("whole", "exact", "fast")
FAST_HALO_STRIDES = 6  # fast halo: 192 px for stride 32; 99.93% label agreement at 2048 in 2x2 tiles (128 px: 99.42%)
MIN_TILE_STRIDES = 2  # the smallest tile core, in total strides, before giving up on the device


class BudgetTooSmallError(ValueError):
    """A memory budget that cannot hold even the smallest tile beside the image; the message says the least."""

    def __init__(self, message: str, least_bytes: int = 0) -> None:
        super().__init__(message)
        self.least_bytes = least_bytes  # the smallest budget that holds it (0: not known)


@dataclass(frozen=True)
class Tile:
    core: Box  # the output pixels this tile writes
    read: Box  # the input pixels it reads: the core grown by the halo, clipped to the image


@dataclass(frozen=True)
class TilingPlan:
    mode: str  # whole (one pass) | exact (halo = receptive field) | fast (smaller halo)
    height: int  # image rows
    width: int  # image columns
    tile_shape: tuple[int, int]  # (rows, columns) of a tile's core, multiples of `stride` (>= the image for one)
    halo_px: int  # input pixels read beyond the core on each side, a multiple of `stride`
    stride: int  # the model's total stride; tile origins are multiples of it
    exact_halo_px: int | None  # the receptive-field halo, used when a whole-image pass must be split; None:
    # the model has no bounded field (global pooling, normalisation over the image): tiles can only be fast
    tile_bytes: int | None = None  # predicted peak of the largest tile
    budget_bytes: int | None = None  # the budget the plan was sized for: tiles plus held_bytes
    held_bytes: int = 0  # what the job holds besides the tile: the image and its output arrays
    image_width: int | None = None  # the image's own width when `width` is a canvas padded wider (mirror averaging)
    why_approximate: str = "receptive field unbounded"  # why tiles cannot be exact, when exact_halo_px is None
    fast_halo_px: int | None = None  # the halo of fast tiles, should a whole-image pass need them (None: the default)
    # the largest (rows, columns) the model takes in one pass, halo included (a program exported for a bounded
    # size range; 0: any side); None: any size
    max_read_px: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown tiling mode {self.mode!r}; valid: {', '.join(MODES)}")
        if any(side <= 0 or side % self.stride for side in self.tile_shape):
            raise ValueError(f"tile_shape sides must be positive multiples of the stride {self.stride}, "
                             f"got {self.tile_shape}")
        if self.halo_px < 0 or self.halo_px % self.stride:
            raise ValueError(f"halo_px must be a multiple of the stride {self.stride}, got {self.halo_px}")

    @property
    def grid(self) -> tuple[int, int]:
        """(tile rows, tile columns)."""
        return -(-self.height // self.tile_shape[0]), -(-self.width // self.tile_shape[1])

    def tiles(self) -> list[Tile]:
        """Every tile, row by row."""
        cores = split_box((0, self.height, 0, self.width), self.tile_shape)
        return [Tile(core, grow_box(core, self.halo_px, self.height, self.width)) for core in cores]

    def describe(self) -> str:
        """One line for the CLI and the job events."""
        over = (self.tile_bytes is not None and self.budget_bytes is not None
                and self.tile_bytes + self.held_bytes > self.budget_bytes)
        held = f" with {format_bytes(self.held_bytes)} of image and outputs" if self.held_bytes else ""
        budget = (f"{held} {'over' if over else 'within'} budget {format_bytes(self.budget_bytes)}"
                  if self.budget_bytes else "")
        estimate = f", estimated tensor peak {format_bytes(self.tile_bytes)}" if self.tile_bytes else ""
        if self.mode == "whole":
            return f"whole image {self.image_width or self.width}x{self.height} in one pass{estimate}{budget}"
        rows, cols = self.grid
        tile_rows, tile_cols = (min(side, whole) for side, whole in zip(self.tile_shape, (self.height, self.width)))
        grid = "one tile" if rows == cols == 1 else f"{_count(rows, 'row')} x {_count(cols, 'column')} of tiles"
        field = (f"{self.why_approximate}: tiles are approximate" if self.exact_halo_px is None
                 else f"receptive field {self.exact_halo_px} px")
        if self.max_read_px is not None:
            field += f"; the model takes at most {_sides(self.max_read_px)} px a pass"
            if any(limit and side > limit for side, limit in zip((self.height, self.width), self.max_read_px)):
                field += ", the range it was exported for: export it with a larger max to run this image whole"
        return (f"tiling {self.mode}: {grid} {tile_cols}x{tile_rows} px (width x height) + halo {self.halo_px} px "
                f"({field}){estimate} per tile{budget}")


def _sides(rows_cols: tuple[int, int]) -> str:
    """(rows, columns) as width x height, 0 read as any."""
    return f"{rows_cols[1] or 'any'}x{rows_cols[0] or 'any'}"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def split_box(core: Box, tile_shape: tuple[int, int]) -> list[Box]:
    """Cut a box into cores of at most tile_shape (rows, columns), from its top-left corner, row by row."""
    top, bottom, left, right = core
    rows, cols = tile_shape
    return [(y, min(y + rows, bottom), x, min(x + cols, right))
            for y in range(top, bottom, rows) for x in range(left, right, cols)]


def grow_box(core: Box, halo_px: int, height: int, width: int) -> Box:
    """The core grown by the halo on every side, clipped to the image."""
    top, bottom, left, right = core
    return max(0, top - halo_px), min(height, bottom + halo_px), max(0, left - halo_px), min(width, right + halo_px)


def choose_tiling(height: int, width: int, *, mode: str, budget_bytes: int, tile_bytes: TileBytes,
                  stride: int, exact_halo_px: int | None, fast_halo_px: int | None = None, held_bytes: int = 0,
                  max_tile_bytes: int | None = None, refuse_over_budget: bool = False,
                  image_width: int | None = None, max_read_px: tuple[int, int] | None = None) -> TilingPlan:
    """Pick whole-image or tiled inference, and the tile grid that reads the fewest pixels within the budget.

    mode: 'auto' (whole if it fits, else exact tiles; fast ones for a model with no bounded receptive field,
    `exact_halo_px` None), 'off' (whole), 'exact' or 'fast' (tiles that fit; one tile when the whole image
    fits). The budget covers the whole job: a tile gets what `held_bytes` (the image and its outputs, held
    throughout) leaves. Every grid of r rows and c columns of tiles is a candidate; its cost is the pixels its
    tiles read, halos included, and of the grids whose largest tile fits, the cheapest wins (ties: fewer tiles).
    `max_tile_bytes` caps a tile's share further (tile_budget.DEFAULT_MAX_TILE_BYTES by default). When none fits,
    BudgetTooSmallError with `refuse_over_budget` (a budget the user gave), else the smallest tile, and the plan
    says it is over budget. `image_width`: the image's own width where `width` is a wider canvas (messages).
    `max_read_px`: the largest (rows, columns) the model takes in one pass, halo included (0: any side), for a
    program exported for a bounded size range: larger images go in tiles that fit, fast ones where an exact halo
    leaves no room; ValueError when no tile fits, or for mode 'off' on a larger image.
    """
    if mode not in ("auto", "off", "exact", "fast"):
        raise ValueError(f"unknown tiling mode {mode!r}; valid: auto, exact, fast, off")
    fast_halo = fast_halo_px if fast_halo_px is not None else FAST_HALO_STRIDES * stride
    whole_shape = _padded(height, stride), _padded(width, stride)
    limit = (max_read_px[0] or 2**62, max_read_px[1] or 2**62) if max_read_px is not None else (2**62, 2**62)
    whole_runs = whole_shape[0] <= limit[0] and whole_shape[1] <= limit[1]
    if mode == "off" and not whole_runs:
        assert max_read_px is not None
        raise ValueError(f"tiling off runs the whole {image_width or width}x{height} image in one pass, but the model "
                         f"takes at most {_sides(max_read_px)} px a pass; use auto, exact or fast tiles")
    whole_bytes = tile_bytes(*whole_shape) if whole_runs else None  # the model cannot run it: not estimated
    tile_budget = budget_bytes - held_bytes
    if max_tile_bytes is not None:
        tile_budget = min(tile_budget, max_tile_bytes)
    if mode == "off" or (mode == "auto" and whole_bytes is not None and whole_bytes <= tile_budget):
        return TilingPlan("whole", height, width, whole_shape, 0, stride, exact_halo_px, whole_bytes, budget_bytes,
                          held_bytes, image_width, fast_halo_px=fast_halo, max_read_px=max_read_px)
    if exact_halo_px is None and mode == "exact":
        raise ValueError("exact tiles need a bounded receptive field, and this model has none; use fast or off")
    tiled_mode = "fast" if mode == "fast" or exact_halo_px is None else "exact"
    if exact_halo_px is None:
        halo = fast_halo
    else:
        halo = min(fast_halo, exact_halo_px) if tiled_mode == "fast" else exact_halo_px
    # the widest halo the smallest tiles leave room for, within the model's range
    room = _halo_within(height, width, stride, limit) if max_read_px is not None else halo
    if room is None or (halo > room and tiled_mode == "exact" and mode == "exact"):
        assert max_read_px is not None
        least = MIN_TILE_STRIDES * stride + (2 * halo if room is not None else 0)
        raise ValueError(f"the model takes at most {_sides(max_read_px)} px a pass, less than its smallest "
                         f"{'exact ' if room is not None else ''}tile ({least} px a side with its halo)"
                         + ("; use fast or auto tiles" if room is not None else ""))
    if halo > room:  # exact tiles would not fit the model's range: fast ones with the halo that does
        tiled_mode, halo = "fast", room
    bounded = max_read_px is not None
    rows, cols = _Axis(height, stride, halo, bounded), _Axis(width, stride, halo, bounded)

    def need(row_count: int, col_count: int) -> int:
        return tile_bytes(rows.largest_read(row_count), cols.largest_read(col_count))

    def fits(row_count: int, col_count: int) -> bool:
        if rows.largest_read(row_count) > limit[0] or cols.largest_read(col_count) > limit[1]:
            return False  # the model cannot run it: not estimated
        return need(row_count, col_count) <= tile_budget

    best: tuple[int, int, int, int] | None = None  # (pixels read, tiles, columns, rows): ties go to full-width rows
    fewest_cols = cols.most  # the fewest columns that fit only falls as rows are added: search below it
    for row_count in range(1, rows.most + 1 if fits(rows.most, cols.most) else 1):
        if best is not None and rows.total_read(row_count) * width > best[0]:
            break  # more rows only read more, whatever the columns
        if best is None and not fits(row_count, fewest_cols):
            continue  # not even the narrowest columns fit beside these rows
        fewest_cols = _fewest_fitting(fewest_cols, partial(fits, row_count))
        candidate = (rows.total_read(row_count) * cols.total_read(fewest_cols), row_count * fewest_cols,
                     fewest_cols, row_count)
        best = candidate if best is None else min(best, candidate)
    row_count, col_count = (best[3], best[2]) if best is not None else (rows.most, cols.most)
    if best is None and refuse_over_budget:
        smallest = need(row_count, col_count)
        raise BudgetTooSmallError(
            f"the memory budget {format_bytes(budget_bytes)} cannot hold a {image_width or width}x{height} image: "
            f"its pixels and outputs take {format_bytes(held_bytes)} and the smallest tile ({rows.core(row_count)}x"
            f"{cols.core(col_count)} px + halo {halo} px) {format_bytes(smallest)}; give --memory-budget at least "
            f"{format_bytes(held_bytes + smallest)}", least_bytes=held_bytes + smallest)
    return TilingPlan(tiled_mode, height, width, (rows.core(row_count), cols.core(col_count)), halo, stride,
                      exact_halo_px, need(row_count, col_count), budget_bytes, held_bytes, image_width,
                      fast_halo_px=fast_halo, max_read_px=max_read_px)


def reads_within(tile_shape: tuple[int, int], halo_px: int, stride: int,
                 max_read_px: tuple[int, int] | None) -> tuple[tuple[int, int], int]:
    """(tile core, halo) shrunk, the core first, so that a tile reads at most `max_read_px` (rows, columns; 0: any)
    with its halo on both sides; unchanged for None."""
    if max_read_px is None:
        return tile_shape, halo_px
    sides = list(tile_shape)
    for axis, limit in enumerate(max_read_px):
        if limit and sides[axis] + 2 * halo_px > limit:
            sides[axis] = max(stride, (limit - 2 * halo_px) // stride * stride)
            halo_px = min(halo_px, max(0, (limit - sides[axis]) // 2 // stride * stride))
    return (sides[0], sides[1]), halo_px


def _halo_within(height: int, width: int, stride: int, limit: tuple[int, int]) -> int | None:
    """The widest halo (a multiple of the stride) with which the smallest tiles still read at most `limit` (rows,
    columns); None when not even tiles with no halo do."""
    widest = None
    for halo in range(0, max(limit) // 2 + stride, stride):
        rows, cols = _Axis(height, stride, halo, True), _Axis(width, stride, halo, True)
        if rows.largest_read(rows.most) > limit[0] or cols.largest_read(cols.most) > limit[1]:
            break
        widest = halo
        if halo >= max(height, width):  # reads are the whole image from here on
            break
    return widest


def _fewest_fitting(fitting: int, fits: Callable[[int], bool]) -> int:
    """The fewest columns in [1, fitting] that fit, given that `fitting` does and more columns fit more
    easily: gallop down from `fitting` (the answer is often close), then bisect."""
    step = 1
    while fitting - step >= 1 and fits(fitting - step):
        fitting -= step
        step *= 2
    low = max(1, fitting - step + 1)  # fitting - step did not fit (or is below 1)
    while low < fitting:
        middle = (low + fitting) // 2
        if fits(middle):
            fitting = middle
        else:
            low = middle + 1
    return fitting


@dataclass(frozen=True)
class _Axis:
    """One side of the image cut into `count` stride-aligned cores, each read with the halo."""

    pixels: int
    stride: int
    halo: int
    bounded: bool = False  # the model takes a bounded size: the smallest cores are MIN_TILE_STRIDES strides exactly

    @property
    def most(self) -> int:
        """The most cores: each at least MIN_TILE_STRIDES strides (one core when the side is smaller)."""
        smallest = MIN_TILE_STRIDES * self.stride
        return max(1, -(-self.pixels // smallest) if self.bounded else self.pixels // smallest)

    def core(self, count: int) -> int:
        return _padded(-(-self.pixels // count), self.stride)

    def _reads(self, count: int) -> list[int]:
        core = self.core(count)
        return [min(start + core + self.halo, self.pixels) - max(0, start - self.halo)
                for start in range(0, self.pixels, core)]

    def largest_read(self, count: int) -> int:
        return _padded(max(self._reads(count)), self.stride)

    def total_read(self, count: int) -> int:
        return sum(self._reads(count))


def _padded(pixels: int, stride: int) -> int:
    return -(-pixels // stride) * stride
