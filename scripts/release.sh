#!/usr/bin/env bash
# Build, validate and (dry-run) publish a release from the judgment shards of a work folder.
#   scripts/release.sh WORK ORG/NAME vX.Y.Z [--yes]
# The release folder is WORK/researchy-subq-judgments, so load_dataset("researchy-subq-judgments") works from WORK.
set -euo pipefail
WORK=${1:?work folder}; REPO=${2:?ORG/NAME}; TAG=${3:?vX.Y.Z}; shift 3
OUT="$WORK/researchy-subq-judgments"
researchy-subq build-release --profile "${PROFILE:-paper}" --repo "$REPO" --out "$OUT" \
  --judgments "$WORK/judgments/train" --questions "$WORK/questions/train" \
  $( [ -d "$WORK/judgments/test" ] && echo --judgments "$WORK/judgments/test" --questions "$WORK/questions/test" )
researchy-subq validate "$OUT" --expect cards/expected_levels.yaml
researchy-subq publish "$OUT" --repo "$REPO" --tag "$TAG" "$@"
