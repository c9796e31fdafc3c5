"""citeweave sync."""
