#!/usr/bin/env bash
# Installs what is missing, builds, fetches the test data and runs the whole CTest suite.
# Extra arguments go to ctest (for example: -L slow, -LE slow, -R Checkpoint).
source "$(dirname "$0")/common.sh"
install_deps
install_test_tools
build
"$ROOT/scripts/fetch_data.sh"
cd "$BUILD_DIR"
ctest --output-on-failure -j "$(nproc)" "$@"
