"""citeweave embedder."""
