"""The inference worker thread (owns the model and device) and the controller the main window talks to."""
