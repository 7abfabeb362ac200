"""Read a `torch.export` archive (`.pt2`) without running code from it.

`torch.export.load` unpickles parts of an archive (sample inputs, pickled weights, custom objects) and,
when weights-only unpickling fails, falls back to full unpickling with only a warning; an archive may
also carry AOTInductor shared libraries. Here the archive's table of contents is checked first (only
JSON graphs, raw tensor payloads and weights-only sample inputs), then it is read with every unpickling
held to `weights_only=True`: anything else is refused with a clear error.
"""
from __future__ import annotations

import contextlib
import json
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch


class UnsafeModelFile(ValueError):
    """A model file that would need to run code (unpickling objects, loading libraries) to be opened."""


_LOAD_LOCK = threading.Lock()  # the guard swaps module attributes: one archive at a time
_CONFIGS = ("data/weights/model_weights_config.json", "data/constants/model_constants_config.json")


def is_pt2_archive(path: Path) -> bool:
    """A zip whose entries include a torch.export archive's `archive_format`."""
    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as archive:
        return any(name.endswith("archive_format") for name in archive.namelist())


def check_pt2_contents(path: Path) -> None:
    """Refuse an archive that needs more than weights-only unpickling; raises UnsafeModelFile or ValueError."""
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as err:
        raise ValueError(f"not a readable .pt2 archive (truncated?): {err}") from err
    with archive:
        names = archive.namelist()
        prefix = names[0].split("/", 1)[0] + "/" if names and "/" in names[0] else ""
        relative = [name[len(prefix):] if name.startswith(prefix) else name for name in names]
        for name in relative:
            if name.startswith("data/aotinductor/") or name.endswith((".so", ".dll", ".dylib")):
                raise UnsafeModelFile(f"the archive carries compiled code ({name}); leanseg opens graphs only")
            if name.startswith(("data/weights/", "data/constants/")) and name.endswith(".pt"):
                raise UnsafeModelFile(f"the archive stores pickled weights ({name}); re-save it with torch.export.save")
        for config in _CONFIGS:
            if config not in relative:
                raise ValueError(f"not a torch.export archive from torch >= 2.8 (no {config})")
            try:
                entries = json.loads(archive.read(prefix + config))["config"]
            except (KeyError, ValueError, zipfile.BadZipFile) as err:
                raise ValueError(f"damaged archive entry {config}: {err}") from err
            for key, meta in entries.items():
                pickled = bool(meta.get("use_pickle")) if isinstance(meta, dict) else True
                path_name = str(meta.get("path_name", "")) if isinstance(meta, dict) else ""
                if pickled or path_name.startswith(("custom_obj", "opaque_obj")):
                    raise UnsafeModelFile(f"{key} is stored as a pickled object; leanseg loads raw tensors only")


@contextlib.contextmanager
def _weights_only_unpickling() -> Iterator[None]:
    """Within: torch.load is weights-only whatever its caller asks; raw pickle loads raise."""
    real_load = torch.load

    def weights_only_load(*args: Any, **kwargs: Any) -> Any:
        kwargs["weights_only"] = True
        return real_load(*args, **kwargs)

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise UnsafeModelFile("the archive needs to unpickle an object; leanseg loads raw tensors only")

    from torch.export.pt2_archive import _package

    saved = (torch.load, _package.pickle.loads, torch._C._pickle_load_obj)
    torch.load = weights_only_load  # type: ignore[assignment]
    _package.pickle.loads = refuse  # type: ignore[assignment]
    torch._C._pickle_load_obj = refuse
    try:
        yield
    finally:
        torch.load, _package.pickle.loads, torch._C._pickle_load_obj = saved  # type: ignore[assignment]


def load_exported_program(path: Path) -> torch.export.ExportedProgram:
    """The ExportedProgram in `path`, read with no code from the file run; ValueError on a bad file."""
    check_pt2_contents(path)
    from torch.export.pt2_archive._package import load_pt2

    with _LOAD_LOCK, _weights_only_unpickling():
        try:
            contents = load_pt2(str(path))
        except UnsafeModelFile:
            raise
        except Exception as err:  # the deserialiser raises many kinds on damaged input
            if isinstance(err.__cause__, UnsafeModelFile) or "weights_only" in str(err).lower() \
                    or "unpickl" in str(err).lower():
                raise UnsafeModelFile("the archive needs more than weights-only unpickling "
                                      "(a pickled object in it); leanseg loads raw tensors only") from err
            raise ValueError(f"cannot read the .pt2 archive: {type(err).__name__}: "
                             f"{str(err).splitlines()[0][:200] if str(err) else ''}") from err
    programs = contents.exported_programs
    if len(programs) != 1:
        raise ValueError(f"the archive holds {len(programs)} programs ({', '.join(programs) or 'none'}); expected one")
    return next(iter(programs.values()))
