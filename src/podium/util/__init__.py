"""Small helpers any layer may import: a bounded cache, asyncio helpers, secrets hidden in URLs."""
