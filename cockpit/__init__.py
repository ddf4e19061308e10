"""cockpit: a terminal cockpit for deploying EAGLE-3 drafters with SGLang on GPU hosts."""

__version__ = "0.1.0"
