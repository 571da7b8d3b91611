#!/usr/bin/env bash
# Installs what is missing, builds, fetches the Brown corpus, trains the default config and
# shows the result (validation loss, a generated sample, and runs/demo/chart.png).
source "$(dirname "$0")/common.sh"
install_deps
build
"$ROOT/scripts/fetch_data.sh"
cd "$ROOT"
"$BUILD_DIR/bin/swarmrt" train --config configs/tiny.toml --out runs/demo --overwrite "$@"
# The run's loss, bytes by kind and tokens/s against tokens, as a chart.
"$BUILD_DIR/bin/swarmrt" plot runs/demo --out runs/demo/chart.png --title "swarmrt demo: configs/tiny.toml"
