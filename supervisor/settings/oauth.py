"""A remote server's ``oauth`` block: its keys and values checked, references expanded,
the flow's needs named in the error (``config error: <file>: <path>: <problem>``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from actors.auth import DPOP_MODES, FLOWS, SETTING_KEYS

from .expansion import Expander
from .values import SENSITIVE_NAME, Invalid, child, expect_object, show

BOOLEAN_KEYS = ("token_exchange",)


def read_oauth(entry: Mapping[str, Any], path: str, exp: Expander) -> Mapping[str, Any] | None:
    """A remote server's ``oauth`` block, checked and expanded (None when absent or false)."""
    if "oauth" not in entry or entry["oauth"] is False:
        return None
    where = child(path, "oauth")
    settings = expect_object(entry["oauth"], where, "an object of OAuth settings or false")
    for key, value in settings.items():
        if key not in SETTING_KEYS:
            known = ", ".join(SETTING_KEYS)
            raise Invalid(child(where, key), f"unknown OAuth setting; expected one of {known}")
        if key in BOOLEAN_KEYS:
            if not isinstance(value, bool):
                raise Invalid(child(where, key), f"expected true or false, got {show(value)}")
        elif not isinstance(value, str):
            raise Invalid(child(where, key), f"expected a string, got {show(value)}")
    frozen: Mapping[str, Any] = exp.deep(settings, where)
    flow = frozen.get("flow", "authorization_code")
    if flow not in FLOWS:
        raise Invalid(child(where, "flow"), f"expected one of {', '.join(FLOWS)}, got {show(flow)}")
    if flow == "client_credentials" and not frozen.get("client_id"):
        raise Invalid(
            where, 'the client_credentials flow needs "client_id" (and "client_secret" or "private_key")'
        )
    if flow == "cross_app_access":
        for needed in ("client_id", "idp_token_endpoint", "id_token"):
            if not frozen.get(needed):
                raise Invalid(where, f'the cross_app_access flow needs "{needed}"')
    if frozen.get("token_exchange") and flow != "authorization_code":
        raise Invalid(
            child(where, "token_exchange"),
            f"token exchange stands in for a person's sign-in (flow authorization_code), not the {flow} flow;"
            " remove it or the flow",
        )
    dpop = frozen.get("dpop", "auto")
    if dpop not in DPOP_MODES:
        raise Invalid(child(where, "dpop"), f"expected one of {', '.join(DPOP_MODES)}, got {show(dpop)}")
    frozen = _workload_identity(frozen, flow, where, exp.base_dir)
    # A literal client_secret (or workload assertion) is as secret as an expanded one.
    exp.secrets.extend(
        value
        for key, value in frozen.items()
        if isinstance(value, str) and (SENSITIVE_NAME.search(key) or key == "assertion")
    )
    return frozen


def _workload_identity(frozen: Mapping[str, Any], flow: str, where: str, base_dir: str) -> Mapping[str, Any]:
    """The jwt_bearer flow's checks; ``assertion_file`` made absolute (it is read at
    every grant, relative to the config file's directory like ``${file:…}``)."""
    given = [key for key in ("assertion", "assertion_file") if frozen.get(key)]
    if flow != "jwt_bearer":
        if given:
            raise Invalid(child(where, given[0]), 'only the "jwt_bearer" flow takes a workload assertion')
        return frozen
    if not frozen.get("client_id"):
        raise Invalid(where, 'the jwt_bearer flow needs "client_id"')
    if len(given) != 1:
        raise Invalid(where, 'the jwt_bearer flow needs one of "assertion" or "assertion_file"')
    if given == ["assertion_file"]:
        path = os.path.join(base_dir, os.path.expanduser(frozen["assertion_file"]))
        return MappingProxyType({**frozen, "assertion_file": os.path.abspath(path)})
    return frozen
