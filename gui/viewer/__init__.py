"""The image viewer with its overlay, the inference controls and the overlay/legend panel."""
