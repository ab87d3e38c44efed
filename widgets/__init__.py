"""Reusable ipywidgets + altair components (imported as psens.widgets)."""
