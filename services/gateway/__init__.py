"""citeweave gateway."""
