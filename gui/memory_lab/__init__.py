"""The memory lab window: per-configuration peaks and per-step profiles of the loaded model."""
