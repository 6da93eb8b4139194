"""Analysis over judgments and releases: label agreement (agreement.py, labels.py), evaluation of runs
(evaluate.py, alpha_ndcg.py) and simulation (simulate.py)."""
