"""Validating a release folder (`validate`): every promise of the folder checked against its own data, and every
value that other columns determine re-derived (rederive*.py). folder.py runs the checks. It derives by its own code
(statistics.py, retrieval_complexity.py, derived_columns.py), over what it shares with assemble/ below both
(builder/release/: layout, contract, topic_index, card_text; builder/pilot/: the pilot's record and card text); of
assemble/ it still imports the training configs' derivation (training_configs.py). It imports nothing of publish/."""
