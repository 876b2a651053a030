"""Cut streaming reply text into phrases worth synthesising on their own.

Sans-I/O. A phrase ends at sentence punctuation, or at a comma or semicolon once it has
enough words to sound natural alone; the rest waits for more text or for ``flush``.
"""

from __future__ import annotations

import re

_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|[;:](?=\s)|\n")
_CLAUSE_END = re.compile(r",(?=\s)")
MIN_CLAUSE_WORDS = 4


class PhraseSplitter:
    def __init__(self) -> None:
        self._buffer = ""

    def push(self, text: str) -> list[str]:
        self._buffer += text
        phrases: list[str] = []
        while True:
            cut = self._next_cut()
            if cut is None:
                return phrases
            phrase, self._buffer = self._buffer[:cut].strip(), self._buffer[cut:]
            if phrase:
                phrases.append(phrase)

    def flush(self) -> list[str]:
        phrase, self._buffer = self._buffer.strip(), ""
        return [phrase] if phrase else []

    def _next_cut(self) -> int | None:
        # A sentence end needs the next character to be sure it is not "4.5" or "Mr."
        # followed by more; the regex lookahead demands whitespace or the buffer's end,
        # and at the buffer's end we wait for more text.
        for match in _SENTENCE_END.finditer(self._buffer):
            if match.end() < len(self._buffer):
                return match.end()
        for match in _CLAUSE_END.finditer(self._buffer):
            if len(self._buffer[: match.start()].split()) >= MIN_CLAUSE_WORDS:
                return match.end()
        return None
