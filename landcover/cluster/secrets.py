"""Telling a secret from a setting: the names and values ``cluster.json`` must not hold.

A field whose name looks like a password, key or token (``adminPassword``, ``accountKey``,
``connectionString``, ``sasToken``, ``clientSecret``, ...) or a value that looks like one (a
private key, a connection string, a SAS URL, anything :func:`landcover.redaction.redact`
removes) is a secret; an SSH public key is not.
"""

from __future__ import annotations

import re
from typing import Any

from landcover.redaction import redact

NO_SECRETS_HINT = (
    "cluster.json must hold no secrets: log in to nodes with an SSH public key "
    "(sshPublicKey) and reach storage with a managed identity or az login"
)

# Fragments of field names (lower case, without '_' or '-') that mark a secret.
_SECRET_NAME_PARTS = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "connectionstring",
    "credential",
    "accountkey",
    "accesskey",
    "apikey",
    "privatekey",
    "sharedkey",
    "storagekey",
    "signature",
    "sas",
)
_PUBLIC_KEY_NAMES = ("sshpublickey", "publickey")
# Values that are secrets whatever the field is called.
_SECRET_VALUES = (
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"), "a private key"),
    (re.compile(r"(?i)(AccountKey|SharedAccessSignature|SharedAccessKey)="), "a connection string"),
    (re.compile(r"(?i)[?&]sig=[^&\s]+"), "a SAS token"),
    (re.compile(r"(?i)\bpassword="), "a password"),
)
PUBLIC_KEY_PREFIXES = (
    "ssh-rsa ",
    "ssh-ed25519 ",
    "ssh-dss ",
    "ecdsa-sha2-nistp256 ",
    "ecdsa-sha2-nistp384 ",
    "ecdsa-sha2-nistp521 ",
    "sk-ssh-ed25519@openssh.com ",
    "sk-ecdsa-sha2-nistp256@openssh.com ",
)


def secret_like(field: str) -> bool:
    """Whether a field name looks like it holds a secret (a password, key or token).

    Args:
        field: A field name in any case or style (``adminPassword``, ``account_key``).

    Returns:
        True for names such as ``password``, ``accountKey``, ``connectionString``,
        ``sasToken``, ``clientSecret`` or any name ending in ``key``, except a public key.
    """
    norm = re.sub(r"[^a-z0-9]", "", field.lower())
    if norm in _PUBLIC_KEY_NAMES:
        return False
    return norm.endswith("key") or any(part in norm for part in _SECRET_NAME_PARTS)


def find_secret(tree: Any, where: str = "") -> str | None:
    """Finds the first secret-like field name or value in JSON-like data.

    Args:
        tree: Parsed JSON or YAML (dicts, lists, scalars).
        where: The path of ``tree`` inside the document, for the message.

    Returns:
        A description such as ``field 'adminPassword'``, or ``None`` when there is none.
    """
    if isinstance(tree, dict):
        for key, value in tree.items():
            path = f"{where}.{key}" if where else str(key)
            if secret_like(str(key)):
                return f"field '{path}' looks like a secret"
            found = find_secret(value, path)
            if found:
                return found
    elif isinstance(tree, list):
        for index, value in enumerate(tree):
            found = find_secret(value, f"{where}[{index}]")
            if found:
                return found
    elif isinstance(tree, str):
        what = secret_in_text(tree)
        if what:
            return f"the value of '{where}' looks like {what}"
    return None


def secret_in_text(text: str) -> str | None:
    """What kind of credential a piece of text holds, if any.

    Everything :func:`landcover.redaction.redact` would remove counts (SAS signatures,
    account keys, connection strings, bearer tokens, ``export ..._KEY=...``, ``az login -p``,
    the value of a credential variable in this environment), and so do private keys.

    Args:
        text: A string from cluster.json, or a nodeSetup script.

    Returns:
        A description such as ``a connection string``, or ``None``.
    """
    for pattern, what in _SECRET_VALUES:
        if pattern.search(text):
            return what
    return "a credential" if redact(text) != text else None
