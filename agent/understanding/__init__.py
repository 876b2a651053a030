"""Understanding stage: normalisation, payee lookup and the fast intent path (no LLM).

    from agent.understanding import Payee, Understander

    nlu = Understander.load()                      # loads the committed artefacts once
    u = nlu.understand("send fifty pounds to Ken Sato",
                       payees=[Payee("p1", "Ken Sato")], now=datetime(2022, 3, 15, 9))
    u.intent, u.entities["amount"], u.ambiguity_reason, u.to_dict()

See docs/UNDERSTANDING.md.
"""

from agent.understanding.incremental import PartialTracker
from agent.understanding.payees import BillerDirectory, Candidate, Payee, PayeeIndex
from agent.understanding.trace import TraceEntry
from agent.understanding.understander import (
    ACTION_INTENTS,
    Completeness,
    Understander,
    Understanding,
    turn_completeness,
)

__all__ = [
    "ACTION_INTENTS",
    "BillerDirectory",
    "Candidate",
    "Completeness",
    "PartialTracker",
    "Payee",
    "PayeeIndex",
    "TraceEntry",
    "Understander",
    "Understanding",
    "turn_completeness",
]
