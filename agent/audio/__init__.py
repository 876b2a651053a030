"""Audio front end: voice activity detection and endpointing."""
