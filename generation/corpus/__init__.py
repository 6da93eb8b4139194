"""Corpus: the document store, the docid and URL-hash maps, the questions folder, the Java for Anserini."""
