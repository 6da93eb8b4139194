"""What `researchy-subq pilot` needs of the generation side: its two judge settings (settings.py) and its sample of
pairs (sample.py). The judging is the judge stage's (generation/stages/pilot_judge.py); the measures and the record
are builder/analysis/pilot*.py."""
