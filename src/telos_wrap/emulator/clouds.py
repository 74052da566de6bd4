"""Claude on the clouds: Amazon Bedrock's and Google Vertex AI's paths for the Anthropic Messages API.

Both clouds take the Messages body with the model moved into the URL (and an ``anthropic_version``
field in the body), and answer with the Messages response and usage (docs/engines.md, *Routes*):

* Bedrock (anthropic ``lib/bedrock/_client.py``): ``POST /model/{model}/invoke``; streams use
  ``invoke-with-response-stream``, in AWS's binary event-stream encoding, which the emulator does not
  speak (404);
* Vertex AI (anthropic ``lib/vertex/_client.py``):
  ``POST /projects/{p}/locations/{r}/publishers/anthropic/models/{model}:rawPredict``, streams
  ``:streamRawPredict`` (the Messages SSE stream), token counts ``models/count-tokens:rawPredict``.

The cache is the Anthropic flavour's: caches are per model, the cloud's model id naming the model
(``anthropic.claude-sonnet-4-5-20250929-v1:0``, ``claude-sonnet-4-5@20250929``).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

__all__ = ["cloud_messages_path"]

_BEDROCK = re.compile(r"/model/(?P<model>[^/]+)/invoke$")
_VERTEX = re.compile(r"/publishers/anthropic/models/(?P<model>[^/:]+):(?P<verb>rawPredict|streamRawPredict)$")


def cloud_messages_path(path: str) -> tuple[str, str | None] | None:
    """``(Messages path, model)`` for a Bedrock or Vertex AI path; ``None`` for any other path.

    The model is ``None`` for a token count (its body names the model).
    """
    found = _BEDROCK.search(path)
    if found is not None:
        return "/v1/messages", unquote(found["model"])
    found = _VERTEX.search(path)
    if found is not None:
        if found["model"] == "count-tokens":
            return "/v1/messages/count_tokens", None
        return "/v1/messages", unquote(found["model"])
    return None
