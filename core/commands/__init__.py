"""One module per `leanseg` sub-command; each defines `register(subparsers)`.

SUMMARIES names every sub-command and its one-line help: `leanseg --help` lists them, and a command line
imports only the module of the command it runs (most import torch, 2 s; the listing needs none of them).
"""

SUMMARIES = {
    "batch": "segment a folder of images (resumable)",
    "bench": "measure memory and time, each configuration in its own process",
    "eval": "mean IoU of a model on a labelled split",
    "gui": "open the desktop app (leanseg gui --help: its options)",
    "import-model": "bundle a .pt2/.onnx graph and its card into one .leanseg file",
    "models": "list the installed models with their cards",
    "plot-memory": "draw a --memory-log CSV as a PNG, SVG or PDF chart",
    "profile": "memory profile and train/eval/engine comparison of one model",
    "segment": "segment image files",
    "train": "train a model on image/label pairs",
    "video": "segment a video into an overlay video",
}


def module_name(command: str) -> str:
    """The module of a sub-command: `import-model` lives in `import_model`."""
    return command.replace("-", "_")
