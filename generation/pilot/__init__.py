"""What `researchy-subq pilot` needs of the generation side: its two judge settings (settings.py), its sample of
pairs (sample.py) and the judge stage cut to that sample (judge_stage.py). The measures, the verdict and the record
are builder/pilot/'s."""
