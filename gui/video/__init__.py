"""Segmenting a video: the video panel, live playback, export, and the hook into the main window."""
