"""citeweave generator."""
