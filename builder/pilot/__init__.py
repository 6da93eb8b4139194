"""`researchy-subq pilot`: two judge settings on one sample of pairs, their agreement, their bill and a verdict.

options.py holds the command's options (`PilotOptions`), run.py the orchestration (`Pilot`, `run_pilot`),
measures.py the agreement and the bills, stability.py the level flips, verdict.py the rule, record.py the pilot
record (`pilot.json`), contract.py its typed models (each module returns its part as one), figures.py the figures
derived again from the record's confusion table, card_text.py the card's pilot section. The sample, the settings and the
judge stage cut to the sample are generation/pilot/'s. A release reads a record through record.py
(assemble/pilot.py, validate/pilot.py, the contract's `Manifest.pilot`)."""
