"""Release assembly: build the release folder, its card and manifest, validate it, publish it."""
