"""Segmenting a folder: the batch dialog and the thread that runs the batch job."""
