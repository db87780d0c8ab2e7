"""What zeroscaler may say of an object in words others read (Events, status annotations).

Whoever may read Events in a workload's namespace reads why it woke. The object that woke it may
be elsewhere, where that reader may not look; a Secret's name alone can tell what it guards. So
an object of a Secret-like kind outside the workload's own namespace is named by its kind and
namespace only, and a person's user name only when the request was made in that namespace.
Names and users are reduced to the characters Kubernetes names use, and cut short.
"""

from __future__ import annotations

import re

# Kinds whose names tell what they guard: Secrets, and kinds made after them (ExternalSecret,
# SealedSecret, ...); a ServiceAccount's token subresource mints credentials.
_SECRET_SUFFIXES = ("secret", "secrets")
_CREDENTIAL_SUBRESOURCES = frozenset({("serviceaccounts", "token")})
_UNSAFE = re.compile(r"[^A-Za-z0-9._:/@+=-]")
MAX_WORD = 100  # characters of one name, user or resource in such words


def is_secret_like(kind_or_resource: str, subresource: str = "") -> bool:
    """Whether objects of this kind (or resource, plural) guard credentials."""
    name = kind_or_resource.lower()
    return name.endswith(_SECRET_SUFFIXES) or (name, subresource) in _CREDENTIAL_SUBRESOURCES


def safe_word(text: object) -> str:
    """`text` with only the characters names and users are made of, at most MAX_WORD of them."""
    cleaned = _UNSAFE.sub("?", str(text))
    return cleaned if len(cleaned) <= MAX_WORD else cleaned[: MAX_WORD - 1] + "~"


def safe_text(text: object, limit: int = 300) -> str:
    """A sentence read from elsewhere, with printable ASCII only, at most `limit` characters."""
    cleaned = "".join(c if " " <= c <= "~" else "?" for c in str(text))
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "~"


def place_words(kind: str, namespace: str, name: str, home: str, subresource: str = "") -> str:
    """`namespace/name` (`name` when cluster-scoped), or `in namespace X` for a Secret-like
    object outside `home`."""
    namespace, name = safe_word(namespace), safe_word(name)
    if not namespace:
        return name
    if (namespace != home and is_secret_like(kind, subresource)) or not name:
        return f"in namespace {namespace}"
    return f"{namespace}/{name}"


def object_words(kind: str, namespace: str, name: str, home: str, subresource: str = "") -> str:
    """`Kind` and its place (`place_words`)."""
    return f"{safe_word(kind)} {place_words(kind, namespace, name, home, subresource)}".rstrip()
