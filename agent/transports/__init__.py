"""Transports other than protocol v1: each translates its wire format to the same Call."""
