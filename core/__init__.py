"""leanseg core: models, the memory-lean engine, I/O, jobs and the CLI. Never imports Qt."""

__version__ = "0.1.0"
