"""Modules shared by several component families."""
