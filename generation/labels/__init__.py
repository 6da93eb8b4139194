"""Labels made elsewhere, read for `import-labels` (generation/stages/import_labels.py): the file formats, the OpenAI
Batch result lines, and how an imported document id becomes the kit's (docid, url_hash)."""
