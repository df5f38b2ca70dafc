"""Reference reproduction of EviOmni (rational evidence extraction with RL for RAG)."""

__version__ = "0.1.0"
