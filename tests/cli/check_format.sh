#!/usr/bin/env bash
# Every tracked C++ file is clang-formatted (.clang-format at the root).
set -u
clang_format=$1
files=$(git ls-files '*.cpp' '*.hpp' '*.h' '*.cc' 2>/dev/null)
# Outside a git checkout (a source tarball): every folder's C++ files, build trees left out.
[ -n "$files" ] || files=$(find . \( -path ./.git -o -path './build*' -o -path '*/node_modules' \
  -o -path ./.gpu \) -prune -o \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cc' \) \
  -print 2>/dev/null)
out=$(echo "$files" | xargs "$clang_format" --dry-run --Werror 2>&1)
if [ -n "$out" ]; then
  echo "$out" | head -40
  echo "unformatted files; run: clang-format -i \$(git ls-files '*.cpp' '*.hpp')"
  exit 1
fi
echo "$(echo "$files" | wc -l) files formatted"
