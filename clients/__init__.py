"""Programs that call the server."""
