"""What a secret looks like: credential variables' names and the forms secrets take in text.

:mod:`landcover.redaction` puts ``***`` in place of each wherever landcover prints or writes
text. What counts as a secret:

- the value of every environment variable whose name marks a credential (``*KEY*``,
  ``*SECRET*``, ``*TOKEN*``, ``*PASSWORD*``, ``*CONNECTION_STRING*``, ``*SAS*``, ...), e.g.
  ``AZURE_STORAGE_ACCOUNT_KEY``, ``AZURE_STORAGE_SAS_TOKEN``, ``AZURE_CLIENT_SECRET``, wherever
  it appears, also percent-encoded;
- shared-access-signature fields in a URL query (``sig``, ``se``, ``sp``, ``sv``, ``st``, ...)
  and ``sig=`` anywhere, also with ``?``, ``&`` and ``=`` percent-encoded;
- the credential fields of other clouds' signed URLs in a query, as users paste them from
  NAIP's other hosts (AWS S3 presigned ``X-Amz-Signature``, ``X-Amz-Credential``,
  ``X-Amz-Security-Token``, ``Signature``, ``AWSAccessKeyId``; Google Cloud Storage
  ``X-Goog-Signature``, ``X-Goog-Credential``, ``GoogleAccessId``; CloudFront ``Policy``,
  ``Key-Pair-Id``; an ``access_token``, ``token``, ``api_key`` or ``key``), also after an
  XML/HTML-escaped ``&amp;``, a fragment's ``#`` or a ``;``;
- the password in a URL's user part (``https://user:password@host``, an MLflow tracking URI);
- connection-string parts (``AccountKey=``, ``SharedAccessSignature=``, ``SharedAccessKey=``);
- bearer tokens (``Bearer ...``, ``Authorization: ...``), JSON web tokens, and 88-character
  base64 storage account keys;
- ``password=`` / ``client_secret=`` style assignments;
- secrets learnt at run time (a Planetary Computer SAS token), given to
  :func:`landcover.redaction.register_secret`.

This module uses the standard library only.
"""

from __future__ import annotations

import re

# Environment variable names (upper case) that mark a credential.
_SECRET_NAME = re.compile(
    r"(KEY|SECRET|TOKEN|PASSWORD|PASSWD|PASSPHRASE|CONNECTION_STRING|SAS|CREDENTIAL|SIGNATURE)"
)
# Names that match the pattern above but hold no secret.
_NOT_SECRET_NAMES = frozenset({"AZURE_STORAGE_ACCOUNT_NAME", "SSH_AUTH_SOCK", "PC_SDK_SAS_URL"})
# Shorter values are not replaced: they would blank out ordinary words and numbers.
MIN_SECRET_LEN = 8

# Shared-access-signature query fields (Azure's SAS, service and user delegation forms).
_SAS_FIELDS = (
    "sig|se|st|sp|sv|spr|srt|ss|sr|sip|sdd|skoid|sktid|skt|ske|sks|skv|saoid|suoid|scid|"
    "rscc|rscd|rsce|rscl|rsct"
)
# credential fields of other clouds' signed URLs (S3 SigV4 / SigV2, GCS V4 / V2, CloudFront) and
# generic token fields
_SIGNED_URL_FIELDS = (
    "x-amz-signature|x-amz-credential|x-amz-security-token|signature|awsaccesskeyid|"
    "x-goog-signature|x-goog-credential|googleaccessid|policy|key-pair-id|access_token|token|"
    "api_key|apikey|key"
)
# a query value: up to the next field, quote, bracket or space (a colon ending a phrase is prose)
_QUERY_VALUE = r"(?:[^&\s'\"#<>;,:)\]}]|:(?![\s'\"]|$))+"
# ? & = also percent-encoded, once or twice (a whole URL quoted into a path or another URL's
# query); a value after an encoded = runs to the next real separator, over encoded ones
QMARK, AMP, EQUALS = r"(?:\?|%(?:25)?3F)", r"(?:&|%(?:25)?26)", r"(?:=|%(?:25)?3D)"
"""Regular-expression pieces for a URL query's ``?``, ``&`` and ``=``, also percent-encoded
(``landcover.storage.urls`` refuses such queries by the same rule)."""
# what comes before a query field: ? and & (also percent-encoded), & escaped in XML or HTML
# (a URL quoted in a VRT or a page), a fragment's # (#access_token=...) and the ; some forms use
_FIELD_START = rf"(?:{QMARK}|&amp;|{AMP}|[#;])"
TEXT_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # a SAS field, another cloud's signed-URL credential or a token field in a URL query
    # (after ?, &, &amp;, # or ;)
    (
        re.compile(
            rf"({_FIELD_START}(?:{_SAS_FIELDS}|{_SIGNED_URL_FIELDS}){EQUALS}){_QUERY_VALUE}",
            re.I,
        ),
        r"\1",
    ),
    # a signature anywhere
    (re.compile(rf"(\bsig{EQUALS}){_QUERY_VALUE}", re.I), r"\1"),
    # a password in a URL's user part (https://user:password@host)
    (re.compile(r"(\b[a-z][a-z0-9+.\-]*://[^/\s:@'\"]*:)[^@\s/'\"]+(?=@)", re.I), r"\1"),
    # connection-string parts
    (
        re.compile(
            r"((?:AccountKey|SharedAccessSignature|SharedAccessKey|ClientSecret)\s*=\s*)"
            r"[^;\s'\"]+",
            re.I,
        ),
        r"\1",
    ),
    # HTTP authorization headers and bearer tokens
    (re.compile(r"(\bBearer\s+)[A-Za-z0-9\-._~+/]+=*", re.I), r"\1"),
    (re.compile(r"(\bAuthorization['\"]?\s*[:=]\s*['\"]?)(?!Bearer\b)[^\s'\",}]+", re.I), r"\1"),
    # password- and secret-style assignments (password=..., client_secret: "...")
    (
        re.compile(
            r"(\b(?:password|passwd|pwd|client_secret|clientsecret|account_key|accountkey|"
            r"sas_token|sastoken)['\"]?\s*[:=]\s*)(?:\"[^\"]*\"|'[^']*'|[^\s'\",;&}]+)",
            re.I,
        ),
        r"\1",
    ),
    # a shell assignment to a credential variable (export AZURE_STORAGE_ACCOUNT_KEY=...)
    (
        re.compile(
            r"(\b[A-Z0-9_]*(?:KEY|SECRET|TOKEN|PASSWORD|PASSWD|CONNECTION_STRING|SAS)[A-Z0-9_]*"
            r"=)(?!\$)(?:\"[^\"]*\"|'[^']*'|[^\s'\";&|]+)"
        ),
        r"\1",
    ),
    # a password on a command line (az login -p ..., --password ...)
    (
        re.compile(
            r"((?:\baz\s+login\b[^\n]*?\s-p|--password|--client-secret|--account-key|"
            r"--sas-token)(?:\s+|=))(?!\$)(?:\"[^\"]*\"|'[^']*'|[^\s'\"]+)"
        ),
        r"\1",
    ),
    # JSON web tokens (Azure AD access tokens)
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"), ""),
    # a storage account key: 64 random bytes in base64 (86 characters and '==')
    (re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{86}=="), ""),
)


def secret_variable(name: str) -> bool:
    """Whether an environment variable's name marks a credential.

    Args:
        name: The variable's name.

    Returns:
        True for names such as ``AZURE_STORAGE_ACCOUNT_KEY``, ``AZURE_STORAGE_SAS_TOKEN``,
        ``AZURE_CLIENT_SECRET`` or ``AZURE_STORAGE_CONNECTION_STRING``.
    """
    upper = name.upper()
    return upper not in _NOT_SECRET_NAMES and bool(_SECRET_NAME.search(upper))
