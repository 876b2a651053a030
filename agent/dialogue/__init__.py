"""Dialogue: what the agent says back."""
