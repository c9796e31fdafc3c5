"""citeweave evaluation."""
