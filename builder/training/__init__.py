"""A retriever trained on a release, on the user's own machine: the release's documents' texts from their licensed
copy (texts.py, clueweb22.py), the files trainers read (files.py), and the fine-tuning recipe with its sampler,
measurements and report (recipe.py, sampler.py, measure.py, report.py)."""
