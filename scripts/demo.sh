#!/usr/bin/env bash
# Installs what is missing, builds the swarmrt executable, fetches the Brown corpus, trains the default config across
# four processes on this machine (two coordinator replicas, of which one leads and one stands
# by, and two nodes: `swarmrt launch --local 2 --coordinators 2`, with a private etcd for the
# leader's lease), with the status page on a free loopback port while it trains, and shows the
# result: the validation loss, a generated sample and runs/demo/chart.png.
source "$(dirname "$0")/common.sh"
install_deps
install_daemons etcd-server
build swarmrt  # only what the demo runs; ./scripts/test.sh builds the rest
"$ROOT/scripts/fetch_data.sh"
cd "$ROOT"
bin="$BUILD_DIR/bin/swarmrt"
# Extra arguments go to `swarmrt launch` (for example --set train.steps=50).
"$bin" launch --local 2 --coordinators 2 --config configs/tiny.toml --out runs/demo --overwrite \
  --http 127.0.0.1:0 "$@" |
  while IFS= read -r line; do
    printf '%s\n' "$line"
    # The coordinator names the page once it serves it; its token is in a file only this user
    # can read (the page keeps it in a cookie after the first visit).
    if [[ $line =~ \]\ status\ page\ on\ (http://[^ ]+/)$ ]]; then
      printf '\n    while it trains: open %s?token=%s\n\n' "${BASH_REMATCH[1]}" \
        "$(cat runs/demo/http_token)"
    fi
  done
"$bin" sample --checkpoint runs/demo --tokens 200 --prompt "The jury said"
# The run's loss, bytes by kind and tokens/s against tokens, as a chart.
"$bin" plot runs/demo --out runs/demo/chart.png --title "swarmrt demo: configs/tiny.toml"
echo "chart: runs/demo/chart.png"
