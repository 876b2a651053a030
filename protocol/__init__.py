"""Wire protocol v1 and audio codecs. Pure code: no I/O, no imports from agent/."""
