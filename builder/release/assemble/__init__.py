"""Assembling a release folder (`build-release`): the data files by config and split (data_files.py, with
configs.py, training_configs.py, trec.py, stats.py and complexity.py over builder/release/topic_index.py), then the
card, plot and manifest that describe them (card.py, snippets.py, cards/; the contract, builder/release/contract.py), where the judgments came from (lineage.py,
imported.py, failed_pairs.py, and a pilot's record: pilot.py), and the `datasets` builder class (hf_builder.py).
folder.py runs it all. It imports nothing of validate/ or publish/. (Not named build/: .gitignore and ruff skip
folders of that name.)"""
