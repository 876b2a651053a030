"""Spoken replies: one streaming interface (base.py), an embedded and a Riva backend."""
