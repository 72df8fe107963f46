"""streaming-hf: read Hugging Face Hub repositories as ``hf://datasets/{owner}/{name}[@{revision}]/{path}``.

Listing uses the Hub's tree API, reads its ``resolve`` endpoint (ranged reads for footers, redirects followed with
the token dropped on another host); a branch or tag is pinned to its commit on first use.
"""

from streaming_hf.url import HfURL, parse_hf_url

__all__ = ['HfURL', 'parse_hf_url']
