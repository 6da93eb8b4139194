#!/usr/bin/env bash
# Regenerate judgment shards on a Slurm cluster: one array task per shard, rank = SLURM_ARRAY_TASK_ID.
# A preempted or failed task is simply resubmitted: finished shards are skipped and a shard in progress
# resumes from its last checkpointed chunk.
#
#   sbatch --array=0-63 scripts/slurm_judge_array.sh            # 64 shards
#SBATCH --job-name=researchy-subq-judge
#SBATCH --gpus-per-task=4
#SBATCH --cpus-per-task=16
#SBATCH --mem=256G
#SBATCH --time=24:00:00
#SBATCH --requeue
set -euo pipefail
: "${SLURM_ARRAY_TASK_ID:?run me with sbatch --array}"
NUM_SHARDS=${NUM_SHARDS:-${SLURM_ARRAY_TASK_COUNT:-64}}
WORK=${WORK:-/scratch/$USER/researchy-subq}
PROFILE=${PROFILE:-paper}
SPLIT=${SPLIT:-train}

researchy-subq judge --profile "$PROFILE" \
  --subquestions "$WORK/questions/$SPLIT" --candidates "$WORK/candidates/$SPLIT" --index "$WORK/index" \
  --out "$WORK/judgments/$SPLIT" --shard "$SLURM_ARRAY_TASK_ID" --num-shards "$NUM_SHARDS"
