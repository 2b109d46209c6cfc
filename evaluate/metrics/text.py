"""Every way the metrics cut text into pieces, in one place.

English and Chinese need different tokenizers, and each metric family has its own convention
(sacrebleu's 13a, rouge-score's alphanumeric tokens, SQuAD's normalised bag of words). Keeping
them together makes the choices visible and lets signatures name them by the same words.
"""

from __future__ import annotations

import functools
import logging
import re
import string
import unicodedata
from typing import Callable

LANGUAGES = ("en", "cn")

# --- jieba -------------------------------------------------------------------------------

_JIEBA_READY = False


def ensure_jieba() -> None:
    """Load jieba's dictionary now (quietly), so forked workers inherit it instead of each
    spending a second rebuilding it."""
    global _JIEBA_READY
    if not _JIEBA_READY:
        import jieba

        jieba.setLogLevel(logging.WARNING)
        jieba.initialize()
        _JIEBA_READY = True


def jieba_tokens(text: str) -> list[str]:
    """jieba's precise-mode segmentation, whitespace tokens dropped."""
    ensure_jieba()
    import jieba

    return [t for t in jieba.lcut(text) if t.strip()]


def jieba_version() -> str:
    import jieba

    return f"jieba {jieba.__version__}"


# --- the script of an item's texts ----------------------------------------------------------

# Han (with extensions and compatibility ideographs), kana and Hangul: scripts written without spaces
# between words (Korean has them, but rouge-score's tokenizer and SQuAD's split drop or glue its syllables)
_CJK = re.compile("[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
                  "\uf900-\ufaff\U00020000-\U0003134f]")
CJK_SCRIPTS = "Han, kana or Hangul characters"


def has_cjk(text: str) -> bool:
    return bool(text) and not text.isascii() and _CJK.search(text) is not None  # isascii: English costs ~nothing


def script_language(language: str, *texts: str) -> str:
    """The tokenizer one item gets: the config's `language`, except that under `en` an item whose texts (the
    answer, the references) hold CJK characters is cut as `cn` cuts it (jieba): an English tokenizer drops or
    glues those characters, and a Chinese answer equal to its Chinese reference scored ROUGE 0.0 (issue 47).
    Items without them are cut exactly as before, so English-only scores do not change."""
    if language == "en" and any(has_cjk(t) for t in texts):
        return "cn"
    return language


def cjk_rule(tokenizer: str, whose: str = "answer or a reference") -> str:
    """The signature's account of that rule under language en: which tokenizer, for which items."""
    return f"{tokenizer}, for an item whose {whose} holds {CJK_SCRIPTS}"


# --- plain words (Distinct) ----------------------------------------------------------------

_WORD_RE = re.compile(r"\w+(?:['’]\w+)*")


def _is_punct(token: str) -> bool:
    return all(unicodedata.category(ch).startswith(("P", "S")) for ch in token)


def words(text: str, language: str) -> list[str]:
    """Lower-cased word tokens without punctuation.

    en: runs of letters/digits (keeping inner apostrophes: "don't" is one word).
    cn: jieba words, punctuation tokens dropped. Punctuation is left out in both so that a
    repeated full stop does not count as repetition.
    """
    if language == "cn":
        return [t.lower() for t in jieba_tokens(text) if not _is_punct(t)]
    return _WORD_RE.findall(text.lower())


def words_description(language: str) -> str:
    if language == "cn":
        return f"{jieba_version()} words, lower-cased, punctuation dropped"
    return r"regex \w+(?:'\w+)* on lower-cased text"


# --- sentences (ROUGE-Lsum) ----------------------------------------------------------------

# Titles and abbreviations after which a full stop rarely ends a sentence.
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e no inc ltd co corp gen gov sen rep lt col sgt capt mt ft "
    "jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k".split()
)
_EN_BOUNDARY = re.compile(r"([.!?]+)([\"'”’)\]]*)\s+")
_CN_BOUNDARY = re.compile(r"([。！？!?；;…]+[”’」』）)]*)")


def _ends_with_abbreviation(chunk: str) -> bool:
    last = chunk.rsplit(None, 1)[-1] if chunk.strip() else ""
    word = last.rstrip(".").lstrip("\"'“‘(").lower()
    # a lone initial ("J. K. Rowling") or a known abbreviation
    return (len(word) == 1 and word.isalpha()) or word in _ABBREVIATIONS


def split_sentences(text: str, language: str) -> list[str]:
    """A small rule-based splitter (nltk's punkt data is not available offline).

    Existing newlines always end a sentence. en: a run of . ! ? (plus closing quotes or
    brackets) followed by whitespace ends one, except after a single letter or a common
    abbreviation ("Mr.", "U.S."). cn: 。！？；… end one, no whitespace needed.
    """
    out: list[str] = []
    for line in text.splitlines():
        if language == "cn":
            pieces = _CN_BOUNDARY.sub("\\1\n", line).split("\n")
        else:
            pieces = []
            start = 0
            for m in _EN_BOUNDARY.finditer(line):
                chunk = line[start : m.end(2)]
                if m.group(1) == "." and _ends_with_abbreviation(line[start : m.start(1) + 1]):
                    continue
                pieces.append(chunk)
                start = m.end()
            pieces.append(line[start:])
        out.extend(p.strip() for p in pieces if p.strip())
    return out


SENTENCE_SPLITTER = "regex splitter (evaluate.metrics.text.split_sentences)"

# --- ROUGE ---------------------------------------------------------------------------------


class _MemoStemmer:
    """Porter stemming is most of rouge-score's tokenizing time; words repeat, so remember them."""

    def __init__(self) -> None:
        from nltk.stem import porter

        self._stemmer = porter.PorterStemmer()
        self._memo: dict[str, str] = {}

    def stem(self, word: str) -> str:
        out = self._memo.get(word)
        if out is None:
            if len(self._memo) > 200_000:
                self._memo.clear()
            out = self._memo[word] = self._stemmer.stem(word)
        return out


class CachedRougeTokenizer:
    """rouge-score's own tokenizer function (same tokens), with a per-text and per-word memo.

    A prediction is re-tokenized for every reference by `RougeScorer.score`; with 11
    references per summary that is most of the work, so tokens of recent texts are kept.
    (rouge-score only needs a `tokenize` method; rouge-score and nltk are imported here,
    not at module import, because nltk's import alone takes seconds.)
    """

    def __init__(self, language: str, use_stemmer: bool):
        from rouge_score import tokenize as rouge_tokenize

        self.language = language
        self.use_stemmer = use_stemmer and language == "en"
        stemmer = _MemoStemmer() if self.use_stemmer else None
        if language == "cn":
            ensure_jieba()
            fn: Callable[[str], list[str]] = _rouge_cn_tokens
        else:
            fn = functools.partial(rouge_tokenize.tokenize, stemmer=stemmer)
        self._tokenize = functools.lru_cache(maxsize=8192)(fn)

    def tokenize(self, text: str) -> list[str]:
        return self._tokenize(text)

    @staticmethod
    def description(language: str, use_stemmer: bool) -> str:
        if language == "cn":
            return f"{jieba_version()} words, lower-cased, punctuation dropped"
        return "rouge-score default (lower-cased ASCII alphanumerics" + (", Porter stemmer)" if use_stemmer else ")")


def _rouge_cn_tokens(text: str) -> list[str]:
    # rouge-score's default tokenizer keeps only [a-z0-9] and would drop every Chinese character.
    return words(text, "cn")


# --- SQuAD-style bag of tokens (Precision / Recall / F1) -----------------------------------

_ARTICLES_RE = re.compile(r"\b(a|an|the)\b")
_PUNCT_TABLE = str.maketrans("", "", string.punctuation)
_CN_TOKEN_RE = re.compile(r"[a-z0-9]+|\S")


def squad_tokens(text: str, language: str) -> list[str]:
    """Tokens for the bag-of-tokens overlap.

    en: SQuAD's normalisation: lower-case, drop ASCII punctuation and the articles a/an/the,
    split on whitespace. cn: characters (runs of Latin letters/digits stay one token),
    punctuation dropped, as the CMRC 2018 evaluation does: a single character match is
    meaningful in Chinese and the score then does not depend on segmentation errors.
    """
    if language == "cn":
        return [t for t in _CN_TOKEN_RE.findall(text.lower()) if not _is_punct(t)]
    text = text.lower().translate(_PUNCT_TABLE)
    return _ARTICLES_RE.sub(" ", text).split()


def squad_description(language: str) -> str:
    if language == "cn":
        return "characters (Latin/digit runs kept whole), lower-cased, punctuation dropped"
    return "SQuAD normalisation: lower-case, drop punctuation and a/an/the, whitespace split"


# --- BLEU ----------------------------------------------------------------------------------


def bleu_pretokenize(text: str, language: str) -> str:
    """cn: jieba words joined by spaces (then sacrebleu runs with tokenize='none'); en: as is."""
    if language == "cn":
        return " ".join(jieba_tokens(text))
    return text
