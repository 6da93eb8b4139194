"""Plans of runs, above the stages they plan: the judge's pairs and what they cost on which GPUs (plan, costing,
execution), and the Slurm array file of any sharded stage (slurm, slurm_plan). Nothing below imports them."""
