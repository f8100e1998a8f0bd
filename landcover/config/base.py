"""The base of every configuration section, and the value checks sections share."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

AUTO = "auto"
"""Value of a setting measured from the training data when training starts."""


SectionT = TypeVar("SectionT", bound="Section")


class Section(BaseModel):
    """A configuration model: unknown keys and non-finite numbers (inf, nan) refused.

    A loaded configuration is not changed afterwards: values settled when training starts
    (measured statistics, the worker count) make a new configuration (:meth:`replace`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    def replace(self: SectionT, **changes: Any) -> SectionT:
        """A copy with some keys changed, validated like a loaded one; this one is unchanged.

        Args:
            **changes: Keys of this model and their new values (models or plain data).

        Returns:
            The new model.

        Raises:
            ValidationError: If a new value, or the model with it, is invalid.
        """
        return type(self).model_validate({**dict(self), **changes})


def no_credentials_in_url(value: str | None) -> str | None:
    """Refuses a data or output URL that carries a shared access signature."""
    from landcover.storage.errors import StorageError
    from landcover.storage.urls import check_no_credentials

    if value is not None:
        try:
            check_no_credentials(value)
        except StorageError as exc:
            raise ValueError(str(exc)) from None
    return value


def numbers_or_auto(value: Any, what: str) -> Any:
    """Rejects anything but a list or ``auto`` up front, with a message users can act on."""
    if isinstance(value, str) and value != AUTO:
        raise ValueError(f"must be a list of numbers ({what}) or auto, not {value!r}")
    return value
