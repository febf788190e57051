import { execFileSync } from "node:child_process";
import { statSync } from "node:fs";
import { describe, expect, it } from "vitest";

// A device call carries at most 64 MiB: the tracked tree plus what bench/gpu/prepare.sh packs into
// .gpu/ (32.8 MB measured 2026-11-29: Node stripped and xz'd, onnxruntime-node, the bundle,
// libvulkan1; bench/gpu/README.md). Held here with a margin, so a large file added to the tree is
// caught in CI rather than on the day a GPU is lent.
const CALL_LIMIT_BYTES = 64 * 1024 * 1024;
const GPU_PAYLOAD_BYTES = 33_000_000;

describe("the GPU benchmark's device call", () => {
  it("leaves room for .gpu/ beside the tracked tree", () => {
    const files = execFileSync("git", ["ls-files", "-z"], { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 })
      .split("\0")
      .filter(Boolean);
    let tracked = 0;
    for (const file of files) {
      try {
        tracked += statSync(file).size;
      } catch {
        // deleted in the work tree: not carried
      }
    }
    expect(tracked + GPU_PAYLOAD_BYTES, `tracked tree ${(tracked / 1e6).toFixed(1)} MB`).toBeLessThanOrEqual(CALL_LIMIT_BYTES);
  });
});
