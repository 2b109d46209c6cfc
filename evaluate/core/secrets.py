"""Keeping credentials out of files, logs and the terminal.

- `scrub_url`: a URL without `user:password@` and without query parameters that may hold a key
  (`?key=`, `?api_key=`, `?token=`...). Used wherever a judge URL is written or printed.
- `scrub_argv`: the command line as the manifest stores it: the value of any key-like flag
  (`--openai_key`, any prefix of it such as `--openai_k`, `--api-key=...`) and any key-shaped
  word (`sk-...`) replaced by `***`.
- `looks_like_key`: a value shaped like an API key (pasted where a variable *name* belongs).
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

# query parameters that may carry a credential (e.g. `?key=` on some proxies)
SECRET_QUERY = ("key", "token", "secret", "sig", "password", "auth")
_KEY_SHAPED = re.compile(r"^(sk-|sk_|gsk_|hf_|xai-|AIza|ghp_|glpat-)\S{6,}|^[A-Za-z0-9_\-]{32,}$")
_SECRET_FLAG_WORDS = ("key", "token", "secret", "password")
REDACTED = "***"


def looks_like_key(value: str) -> bool:
    """Whether `value` is shaped like an API key (an environment variable name in capitals is not)."""
    value = value.strip()
    return bool(_KEY_SHAPED.search(value)) and not re.fullmatch(r"[A-Z][A-Z0-9_]*", value)


def scrub_url(url: str) -> str:
    """The URL without user:password@ and without query parameters that look like credentials.
    Anything that does not parse as a URL is returned with every key-shaped word replaced."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return scrub_words(url)
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host + (f":{port}" if port else "")
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
             if not any(s in k.lower() for s in SECRET_QUERY)]
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), urlencode(query), ""))


def scrub_words(text: str) -> str:
    """`text` with every whitespace-separated key-shaped word replaced by ***."""
    return " ".join(REDACTED if looks_like_key(w) else w for w in text.split(" "))


def _secret_flag(flag: str) -> bool:
    name = flag.lstrip("-").lower().replace("-", "_")
    if not flag.startswith("--") or not name:
        return False
    return any(w in name for w in _SECRET_FLAG_WORDS) or (len(name) >= 6 and "openai_key".startswith(name))


def scrub_argv(argv: list[str]) -> list[str]:
    """argv with the values of key-like flags (every spelling argparse might accept) and key-shaped words hidden."""
    out: list[str] = []
    hide = False
    for a in argv:
        if hide:
            out.append(REDACTED)
            hide = False
            continue
        flag, eq, _ = a.partition("=")
        if _secret_flag(flag):
            out.append(f"{flag}={REDACTED}" if eq else a)
            hide = not eq
        elif "://" in a and "@" in a or "?" in a and "://" in a:
            out.append(scrub_url(a))
        elif looks_like_key(a):
            out.append(REDACTED)
        else:
            out.append(a)
    return out


def secret_values(argv: list[str]) -> list[str]:
    """The words of argv that `scrub_argv` hides (to erase them from a message that quotes argv)."""
    shown = scrub_argv(argv)
    out = []
    for a, s in zip(argv, shown):
        if a != s:
            out.append(a.partition("=")[2] if s.endswith("=" + REDACTED) else a)
    return [v for v in out if v]
