"""Banking voice agent server."""
