"""A level's notes as short sentences. result.json keeps them as one string, clauses joined by
"; " (its schema); a reader gets each clause as a sentence of its own, capitalised and ended,
a "; " inside brackets left where it is."""
from __future__ import annotations

SHORT = 30     # a clause shorter than this stays with the one before it


def clauses(text: str) -> list[str]:
    """Split ``text`` at each "; " outside brackets."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth = max(depth - 1, 0)
        elif ch == ";" and depth == 0 and text[i + 1:i + 2] == " ":
            out.append(text[start:i])
            start = i + 2
    out.append(text[start:])
    merged: list[str] = []
    for c in (c.strip() for c in out):
        if merged and len(c) < SHORT:     # "not listed twice" reads as part of the clause before
            merged[-1] += "; " + c
        elif c:
            merged.append(c)
    return merged


def sentence(clause: str) -> str:
    clause = clause.strip()
    if not clause:
        return ""
    clause = clause[0].upper() + clause[1:]
    return clause if clause[-1] in ".!?" else clause + "."


def sentences(notes) -> list[str]:
    """A note string (or a list of them) as sentences."""
    texts = [notes] if isinstance(notes, str) else list(notes or [])
    return [sentence(c) for t in texts for c in clauses(t)]
