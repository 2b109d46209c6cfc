"""Sentence splitting without downloaded data.

UniEval's release splits outputs with nltk's `sent_tokenize`, which needs the `punkt` model
(not available offline). nltk's Punkt algorithm itself runs without it; what the model adds
is mostly a list of abbreviations, so we give it a hand-made one. Two additions for LLM
answers: blank lines always end a sentence, and a fragment without a single letter ("1.",
"-", "**") is glued to the sentence after it instead of being scored on its own.
"""

from __future__ import annotations

import re

from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

#: Lower-cased, without the final period, as Punkt stores them.
ABBREVIATIONS = frozenset("""
mr mrs ms dr prof sr jr st mt ft rev gen col lt sgt capt gov sen rep pres
vs etc e.g i.e cf al approx dept est fig figs no nos vol vols pp ed eds
inc ltd co corp bros assn
jan feb mar apr jun jul aug sep sept oct nov dec
mon tue tues wed thu thur thurs fri sat sun
u.s u.k u.n u.s.a e.u d.c a.m p.m ph.d b.a m.a b.sc m.sc
""".split())

SPLITTER_VERSION = "punkt-untrained+abbrev-v1"

_tokenizer = PunktSentenceTokenizer(PunktParameters())
_tokenizer._params.abbrev_types.update(ABBREVIATIONS)
_PARAGRAPH = re.compile(r"\n\s*\n")
_HAS_LETTER = re.compile(r"[^\W\d_]")


def split_sentences(text: str) -> list[str]:
    """The sentences of `text`, stripped; [] for blank text."""
    out: list[str] = []
    carry = ""
    for paragraph in _PARAGRAPH.split(text):
        for sent in _tokenizer.tokenize(paragraph):
            sent = sent.strip()
            if not sent:
                continue
            if not _HAS_LETTER.search(sent):
                carry = f"{carry} {sent}".strip()
                continue
            out.append(f"{carry} {sent}".strip() if carry else sent)
            carry = ""
    if carry:
        if out:
            out[-1] = f"{out[-1]} {carry}"
        else:
            out.append(carry)
    return out
