"""trainspeed: measure PyTorch training speed per device, backend and batch size, then train."""

__version__ = "0.1.0"
