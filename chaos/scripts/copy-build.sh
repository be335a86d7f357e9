#!/usr/bin/env bash
# Copies the built server and workspace packages (package.json, dist, node_modules links) to DEST,
# so that a fix can be taken out of the copy's dist for a nemesis run without touching the shared
# tree's builds:  NEMESIS_SERVER_CLI=DEST/apps/server/dist/cli.js pnpm nemesis ...
# The workspace links are relative, so the copy's packages find each other; DEST/node_modules links
# to this tree's third-party modules.
set -euo pipefail
dest=${1:?usage: copy-build.sh DEST [ROOT: the built tree, default this one]}
root=${2:-$(cd "$(dirname "$0")/../.." && pwd)}
rm -rf "$dest"
mkdir -p "$dest"
ln -s "$root/node_modules" "$dest/node_modules"
for dir in "$root"/apps/server "$root"/packages/*; do
  [ -d "$dir/dist" ] || continue
  rel=${dir#"$root"/}
  mkdir -p "$dest/$rel"
  cp -a "$dir/package.json" "$dir/dist" "$dest/$rel/"
  [ -d "$dir/node_modules" ] && cp -a "$dir/node_modules" "$dest/$rel/"
done
echo "$dest/apps/server/dist/cli.js"
