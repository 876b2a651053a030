"""Streaming speech recognition: one interface (base.py), several backends."""
