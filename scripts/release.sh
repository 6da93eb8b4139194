#!/usr/bin/env bash
# Build, validate and (dry-run) publish a release from the judgment shards of a work folder.
#   scripts/release.sh WORK ORG/NAME vX.Y.Z [--yes]
set -euo pipefail
WORK=${1:?work folder}; REPO=${2:?ORG/NAME}; TAG=${3:?vX.Y.Z}; shift 3
researchy-subq build-release --profile "${PROFILE:-paper}" --repo "$REPO" --out "$WORK/release" \
  --judgments "$WORK/judgments/train" --questions "$WORK/questions/train" \
  $( [ -d "$WORK/judgments/test" ] && echo --judgments "$WORK/judgments/test" --questions "$WORK/questions/test" )
researchy-subq validate "$WORK/release" --expect cards/expected_levels.yaml
researchy-subq publish "$WORK/release" --repo "$REPO" --tag "$TAG" "$@"
