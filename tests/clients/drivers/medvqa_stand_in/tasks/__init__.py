"""No tasks of its own: lmms-eval requires a plugin to have this package."""
