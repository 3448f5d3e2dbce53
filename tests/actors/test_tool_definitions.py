"""Tool definitions as pinning sees them: the parts, what changed, and the connection's
lazily hashed listing (``actors/tool_definitions.py``; the whole hash: ``test_trust.py``)."""

from __future__ import annotations

from actors.protocol.messages import Tool
from actors.tool_definitions import DefinitionParts, Fingerprints, changed_parts, fingerprint, part_hashes

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
WIDER = {**SCHEMA, "properties": {"path": {"type": "string"}, "to": {"type": "string"}}}


def test_the_parts_hash_each_part_canonically() -> None:
    parts = part_hashes("Read a file", SCHEMA)
    reordered = {"required": ["path"], "properties": {"path": {"type": "string"}}, "type": "object"}
    assert part_hashes("Read a file", reordered) == parts
    assert len(parts.description) == len(parts.input_schema) == 64
    assert part_hashes("Read a file.", SCHEMA).input_schema == parts.input_schema
    assert part_hashes("\ud800 odd", SCHEMA) == part_hashes("\ud800 odd", SCHEMA)  # lone surrogate ok


def test_changed_parts_names_what_moved() -> None:
    before = part_hashes("Read a file", SCHEMA)
    assert changed_parts(before, part_hashes("Read a file and mail it", SCHEMA)) == "description"
    assert changed_parts(before, part_hashes("Read a file", WIDER)) == "input schema"
    assert changed_parts(before, part_hashes("Mail a file", WIDER)) == "description and input schema"
    # A pin kept from before parts were kept cannot tell which.
    assert changed_parts(None, before) == "description or input schema"
    # Fingerprints that differ though the parts do not (another canonical form): no claim.
    assert changed_parts(before, DefinitionParts(before.description, before.input_schema)) == (
        "description or input schema"
    )


def test_fingerprints_hash_a_listing_on_first_use_only() -> None:
    tool = Tool("read", "Read a file", SCHEMA)
    known = Fingerprints({"read": tool})
    assert dict(known) == {}
    assert known["read"] == fingerprint("Read a file", SCHEMA)
    assert known["gone"] == ""  # not listed
    assert dict(known) == {"read": fingerprint("Read a file", SCHEMA), "gone": ""}
    assert known.tools["read"] is tool
