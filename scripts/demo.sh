#!/usr/bin/env bash
# Installs what is missing, builds, fetches the Brown corpus, trains the default config and
# shows the result (validation loss and a generated sample).
source "$(dirname "$0")/common.sh"
install_deps
build
"$ROOT/scripts/fetch_data.sh"
cd "$ROOT"
"$BUILD_DIR/bin/swarmrt" train --config configs/tiny.toml --out runs/demo --overwrite "$@"
