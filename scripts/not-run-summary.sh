#!/usr/bin/env bash
# Prints ONE line naming the corpus tests that did not run because the external test corpus was
# missing (flow_rules::input::require_corpus lists them in $PKTWARP_NOT_RUN_FILE), and how to
# get it; prints nothing when every test ran. README "Test data".
set -euo pipefail
f=${PKTWARP_NOT_RUN_FILE:?set PKTWARP_NOT_RUN_FILE to the list require_corpus writes}
[ -s "$f" ] || exit 0
names=$(sort -u "$f" | paste -sd, - | sed 's/,/, /g')
n=$(sort -u "$f" | wc -l)
echo "NOT RUN (no external test corpus): $n corpus tests: $names. To run them, put the corpus at ../shared/data beside the checkout or set PKTWARP_DATA to it (README \"Test data\"); with CI=true they fail instead."
