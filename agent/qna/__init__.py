"""QnA: retrieval over the bank's FAQ passages (data/faq/); the LLM answers from them.

See agent/qna/index.py and docs/LLM.md.
"""

from agent.qna.index import FAQIndex, Hit, Passage, spoken_answer

__all__ = ["FAQIndex", "Hit", "Passage", "spoken_answer"]
