"""The release: the folder that is the Hub repository, built from judgment shards, validated, published.

Three groups, each importing only those below it: publish/ -> validate/ -> assemble/. Beside them, what all three
and builder/training/ share: layout.py (the folder's configs, files and manifest name) and no_text.py (no
document text in a release folder)."""
