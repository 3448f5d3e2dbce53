"""What a tool may do, guessed from its MCP annotations and the words of its name and
description: pure functions, no Trio, no I/O. The trust decision (``trust.py``) asks a
person about an untrusted server's risky tools; this module says which tools are risky.

Annotations only ever *add* risk. ``readOnlyHint`` never lowers a risk found in the
name, the description or another hint: an untrusted server that lies in its hints is
exactly what this module guards against, and for trusted servers the hint would change
nothing (they are allowed anyway). So ``readOnlyHint: true`` is only noted in the
reasons; an explicit ``readOnlyHint: false`` is believed and counts as a write. The
spec's pessimistic *defaults* (``destructiveHint``/``openWorldHint`` true when absent)
are not applied: they would make every unannotated tool risky and the classification
meaningless. Only real booleans count (a string "true" is not a hint).

This is a heuristic for honest servers of unknown quality: a server that means harm
can name its tools to look harmless, which is why hosts write ``deny`` rules and keep
servers untrusted until they vouch for them.

Creating things through an API (``create_issue``) counts as ``writes``; it counts as
``network`` only if the name or description says so (url, http, api, fetch, …). The
untrusted default is ``ask`` either way; the split only changes the reasons shown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Name words are matched as whole tokens of the name (split on non-alphanumerics and
# camelCase), base forms only: ``get_updates`` is not ``update``.
_NAME_WORDS: dict[str, frozenset[str]] = {
    "writes": _words(
        "write overwrite create delete del remove rm rmdir unlink update upsert edit modify move mv "
        "rename copy cp save upload insert put patch append mkdir touch commit push merge "
        "checkout reset drop truncate purge destroy set replace chmod chown install uninstall"
    ),
    "network": _words(
        "fetch http https url urls download request browse browser navigate web website webpage api "
        "email mail send post webhook curl wget scrape crawl socket ftp smtp ssh"
    ),
    "shell": _words(
        "exec execute shell command cmd bash sh zsh powershell terminal run spawn subprocess eval "
        "script repl kill"
    ),
}
# Description words are English prose, so only unambiguous forms count: "updates",
# "edits", "moves", "requests", "run" and "process" are too often nouns or harmless.
_DESCRIPTION_WORDS: dict[str, frozenset[str]] = {
    "writes": _words(
        "write writes overwrite overwrites create creates delete deletes remove removes modify "
        "modifies rename renames update edit move save saves upload uploads append appends insert "
        "upsert"
    ),
    "network": _words(
        "fetch fetches http https url urls download downloads internet web website webpage browse "
        "browser navigate navigates webhook curl wget api email send sends"
    ),
    "shell": _words(
        "exec execute executes shell bash zsh powershell terminal command commands subprocess "
        "spawn spawns eval script scripts"
    ),
}
# Verbs that are also nouns; after a reading verb they name a thing: get_workflow_run,
# get_commit and get_post read a run, a commit, a post.
_READ_VERBS = _words("get list search read show describe find view")
_NOUNS_TOO = _words("run post request commit patch update edit set copy merge push move command script")
# "add" is a write (add_comment, add_observations, git_add) except for arithmetic demos.
_ARITHMETIC = _words("add numbers number two ints integers values sum math")
# "process" is shell only next to a lifecycle verb (start_process), not process_image.
_PROCESS_VERBS = _words("start spawn launch kill terminate create new interact")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


@attrs.frozen(slots=True)
class Risk:
    """What a tool may do; ``reasons`` say which word or hint made us think so."""

    writes: bool = False
    network: bool = False
    shell: bool = False
    reasons: tuple[str, ...] = ()

    @property
    def risky(self) -> bool:
        """Any of the three: an untrusted server's call needs a human."""
        return self.writes or self.network or self.shell


def name_tokens(name: str) -> list[str]:
    """Lower-case words of a tool name: ``getCurrentTime``/``get-current_time`` → get, current, time."""
    return [t.lower() for part in re.split(r"[^A-Za-z0-9]+", name) for t in _CAMEL.findall(part)]


def _name_hits(tokens: list[str]) -> list[tuple[str, str]]:
    hits: list[tuple[str, str]] = []
    reading = bool(tokens) and tokens[0] in _READ_VERBS
    for i, token in enumerate(tokens):
        if reading and token in _NOUNS_TOO:
            continue
        if token == "request" and i and tokens[i - 1] in ("pull", "merge"):
            continue  # create_pull_request is a (remote) write, not a raw network request
        for category, words in _NAME_WORDS.items():
            if token in words:
                hits.append((category, token))
        if token == "add" and not set(tokens) <= _ARITHMETIC:
            hits.append(("writes", token))
        if token in ("process", "processes") and _PROCESS_VERBS & set(tokens):
            hits.append(("shell", token))
    return hits


def classify(name: str, description: str, annotations: Mapping[str, Any] | None) -> Risk:
    """Guess what a tool may do from its annotations, name and description.

    Pessimistic by design — a hit in any source sets the flag, nothing clears it —
    but careful about nouns and substrings so that ``get_current_time``,
    ``read_file`` or "progress updates" do not trip it. Never raises on odd input.
    """
    found: dict[str, list[str]] = {"writes": [], "network": [], "shell": []}
    for category, word in _name_hits(name_tokens(name if isinstance(name, str) else "")):
        found[category].append(f"name mentions {word}")
    text = description if isinstance(description, str) else ""
    # \w keeps "write_mode" and "shellfish" whole, so only real words count.
    for word in dict.fromkeys(re.findall(r"\w+", text.lower())):
        for category, words in _DESCRIPTION_WORDS.items():
            if word in words:
                found[category].append(f"description mentions {word}")
    hints = annotations if isinstance(annotations, Mapping) else {}
    if hints.get("destructiveHint") is True:
        found["writes"].append("annotation destructiveHint")
    if hints.get("readOnlyHint") is False:
        found["writes"].append("annotation readOnlyHint false")
    if hints.get("openWorldHint") is True:
        found["network"].append("annotation openWorldHint")
    reasons = [reason for category in ("writes", "network", "shell") for reason in found[category]]
    if reasons and hints.get("readOnlyHint") is True:
        reasons.append("annotation readOnlyHint ignored (hints never clear a risk)")
    return Risk(
        writes=bool(found["writes"]),
        network=bool(found["network"]),
        shell=bool(found["shell"]),
        reasons=tuple(dict.fromkeys(reasons)),
    )
