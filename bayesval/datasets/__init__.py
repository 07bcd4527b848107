"""Synthetic generators and loaders for the shared data files."""
