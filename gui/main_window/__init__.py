"""The main window: menus, file actions, saved state and settings, the model banner, About, --screenshot."""
