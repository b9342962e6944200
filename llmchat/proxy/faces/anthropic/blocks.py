"""Anthropic content blocks a chat upstream has no block for: folded into text, or dropped.

The face's liberal rule (`translate` states it) applied to blocks.
Claude Code and the Agent SDK send block types Anthropic's own servers act
on: server-tool calls and their results, documents, search results, redacted
thinking, compaction summaries, container uploads, and new ones every few
weeks. None is a reason to refuse the turn. A block with text the model
should read is folded into that text (`folded_text`); anything else is
dropped with one DEBUG line naming its field path (`dropped`).

Only a document the upstream cannot read at all (a PDF, a file id) is a
400, in the words Claude Code matches (``messages.N.content.M.document``),
so it strips the document and retries instead of failing the session.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final

from ....errors import InvalidArgumentError

__all__ = ["document_error", "dropped", "folded_text"]

log = logging.getLogger("llmchat.proxy")

# Whose text is only a transport detail of Anthropic's servers, never the model's to read:
# folding an encrypted blob or a file id as text would put noise into the prompt.
_NEVER_FOLDED: Final = frozenset(
    {"redacted_thinking", "server_tool_use", "mcp_tool_use", "container_upload", "image"}
)


def dropped(where: str, kind: str) -> None:
    """Log, once per block, that the block at `where` (of type `kind`) did not go upstream."""
    log.debug("%s (%s) dropped", where, kind)


def folded_text(block: Mapping[str, Any], kind: str, where: str) -> str | None:
    """The text a chat model should see for `block`, or None after logging it as dropped.

    A ``document`` is its title and text (a plain-text or content source);
    a ``search_result`` its title, source and text; a ``compaction`` its
    summary; any other block its ``text``, or the text of its ``content``
    (a string, or blocks with text, as server-tool results carry), each
    search hit of a web search result as ``title <url>``.
    """
    if kind == "document":
        return _document(block, where)
    text = None if kind in _NEVER_FOLDED else _any_text(block)
    if kind == "search_result" and text is not None:
        text = _titled(block, text)
    if not text:
        dropped(where, kind)
        return None
    return text


def document_error(where: str, what: str) -> InvalidArgumentError:
    """The 400 for a document an OpenAI chat upstream cannot take.

    Worded with Anthropic's dotted path (``messages.1.content.0.document``),
    which Claude Code reads as "this document cannot be sent": it removes
    the document and tells the model, rather than failing the turn.
    """
    dotted = where.replace("[", ".").replace("]", "")
    return InvalidArgumentError(
        f"{dotted}.document.source: {what} documents are not supported by this upstream "
        "(it does not support PDF input); send the document's text instead"
    )


def _document(block: Mapping[str, Any], where: str) -> str:
    source = block.get("source")
    kind = source.get("type") if isinstance(source, Mapping) else None
    if kind == "text" and isinstance(source, Mapping) and isinstance(source.get("data"), str):
        text: str | None = source["data"]
    elif kind == "content" and isinstance(source, Mapping):
        text = _any_text(source)
    else:
        raise document_error(where, repr(kind) if isinstance(kind, str) else "these")
    return _titled(block, text or "")


def _titled(block: Mapping[str, Any], text: str) -> str:
    """`text` under the block's ``title`` and ``source`` (a search result's URL), when given."""
    head = [v for v in (block.get("title"), block.get("source")) if isinstance(v, str) and v]
    return "\n".join([*head, text]) if head else text


def _any_text(block: Mapping[str, Any]) -> str | None:
    text = block.get("text")
    if isinstance(text, str):
        return text
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        content = [content]  # a server tool's result object (code execution, fetch)
    if not isinstance(content, list):
        return None
    texts = []
    for item in content:
        if not isinstance(item, Mapping):
            continue
        inner = _any_text(item)
        if inner is None and isinstance(item.get("url"), str):
            # A web search hit: the encrypted page content means nothing here.
            title = item.get("title")
            inner = f"{title} <{item['url']}>" if isinstance(title, str) else item["url"]
        for stream in ("stdout", "stderr"):
            if inner is None and isinstance(item.get(stream), str) and item[stream]:
                inner = item[stream]
        if inner:
            texts.append(inner)
    return "\n".join(texts) if texts else None
