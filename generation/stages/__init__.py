"""Pipeline stages: each module is one stage; `generation.stages.REGISTRY` lists them in order."""
