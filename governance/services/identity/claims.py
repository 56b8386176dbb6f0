"""The claims of an ID token read (the person's username, language and groups), the refusal
of a sign-in (``IdentityRefused``), and the refresh token sealed for storage."""

import base64
import hashlib
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings

from governance.models import User

USERNAME_MAX_LENGTH = 150


@dataclass
class IdentityRefused(Exception):
    """Why a sign-in through the provider is refused: ``code`` names the case (the page's
    message), ``detail`` what the log records, ``params`` the message's values."""

    code: str
    detail: str = ""
    params: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}" if self.detail else self.code


# --- the stored refresh token ----------------------------------------------------------------


def _fernet() -> Fernet:
    digest = hashlib.sha256(f"arbiter-oidc-refresh:{settings.SECRET_KEY}".encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def refresh_token_seal(value: str) -> str:
    return _fernet().encrypt(value.encode()).decode() if value else ""


def refresh_token_open(value: str) -> str:
    if not value:
        return ""
    try:
        return _fernet().decrypt(value.encode()).decode()
    except InvalidToken:
        # Sealed with another secret key: as if there were none.
        return ""


# --- claims ----------------------------------------------------------------------------------


def _text_claim(claims: Mapping[str, Any], name: str, *, required: bool = False) -> str:
    value = claims.get(name) if name else None
    if value is None or value == "":
        if required:
            raise IdentityRefused("claim", f"claim {name!r} missing", {"claim": name})
        return ""
    if not isinstance(value, str):
        raise IdentityRefused("claim", f"claim {name!r} is not a string", {"claim": name})
    return value.strip()


def claimed_groups(claims: Mapping[str, Any]) -> list[str] | None:
    """The groups claim as a sorted list; ``None`` when groups are not used. A configured
    claim that is missing or not a list of strings refuses the sign-in: "in no group" must
    be said (an empty list), never guessed."""
    name = settings.ARBITER_OIDC_GROUPS_CLAIM
    if not name:
        return None
    value = claims.get(name)
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise IdentityRefused("claim", f"claim {name!r} missing or not a list", {"claim": name})
    return sorted(set(value))


def language_from_locale(locale: str) -> str:
    """A provider's locale (BCP 47: ``zh-CN``, ``en-GB``) as one of the site's languages, or
    empty when none fits."""
    tag = locale.strip().lower().replace("_", "-")
    if not tag:
        return ""
    codes = [code for code, _name in settings.LANGUAGES]
    if tag in codes:
        return tag
    base = tag.split("-")[0]
    if base == "zh" and "zh-hans" in codes and not any(t in tag for t in ("hant", "tw", "hk")):
        return "zh-hans"
    return base if base in codes else ""


def _username_for(claims: Mapping[str, Any], *, issuer: str, subject: str) -> str:
    """The new account's username: the username claim (or the e-mail's local part),
    NFKC-normalised, made unique with a short digest of the subject when an account already
    has it in any case."""
    wanted = _text_claim(claims, settings.ARBITER_OIDC_USERNAME_CLAIM)
    if not wanted:
        wanted = _text_claim(claims, settings.ARBITER_OIDC_EMAIL_CLAIM).split("@")[0]
    # NFKC first (a full-width "Ｏｐｓ" is "Ops"), then unique whatever the case (``Ops``
    # beside ``ops`` would read as one person): the User model's constraint.
    wanted = unicodedata.normalize("NFKC", wanted)
    wanted = "".join(ch for ch in wanted if ch.isalnum() or ch in "@.+-_")[:100] or "person"
    if not User.objects.filter(username__iexact=wanted).exists():
        return wanted
    digest = hashlib.sha256(f"{issuer}\n{subject}".encode()).hexdigest()[:8]
    return f"{wanted}-{digest}"[:USERNAME_MAX_LENGTH]


def _provider_reason(issuer: str, text: str, **values: str) -> str:
    values = {"issuer": issuer, "claim": settings.ARBITER_OIDC_GROUPS_CLAIM, **values}
    return ("Identity provider %(issuer)s: " + text) % values
