"""citeweave cli."""
