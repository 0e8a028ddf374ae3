"""andreas: an energy-aware GPU cluster manager for deep-learning training jobs."""

__version__ = "0.1.0"
