"""Where the project's files are. Imports nothing, so any module may import it."""

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
