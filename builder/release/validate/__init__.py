"""Validating a release folder (`validate`): every promise of the folder checked against its own data, and every
value that other columns determine re-derived (rederive*.py). folder.py runs the checks. It reads the folder with
assemble/'s readers and rules (topic_index.py, configs.py, stats.py, training_configs.py) and imports nothing of
publish/."""
