import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { spawnTesseraServe } from "../helpers/serve-process.js";

// ONNX Runtime writes mat-debug-<pid>.log into TMPDIR when its first session opens; the server
// gives it a folder of its own instead of a predictable path in the shared temp directory.
describe("tessera serve's temporary files", () => {
  const shared = mkdtempSync(path.join(tmpdir(), "tessera-shared-tmp-"));
  const dataDir = mkdtempSync(path.join(tmpdir(), "tessera-tmpdir-data-"));
  afterAll(() => {
    rmSync(shared, { recursive: true, force: true });
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("go into a private folder of the process, removed when it stops", async () => {
    const server = await spawnTesseraServe({ TMPDIR: shared, TESSERA_DATA_DIR: dataDir }, 60_000);
    try {
      const deadline = Date.now() + 90_000;
      while ((await fetch(`${server.url}/readyz`)).status !== 200) {
        if (Date.now() > deadline) throw new Error("the bundled model did not become ready");
        await new Promise((r) => setTimeout(r, 250));
      }
      const entries = readdirSync(shared);
      expect(entries.filter((name) => name.startsWith("mat-debug-"))).toEqual([]);
      const own = entries.filter((name) => name.startsWith("tessera-"));
      expect(own).toHaveLength(1);
      // Whether ONNX Runtime writes its log at all varies by environment (not with CI=true); where
      // it does, it is in the private folder, never in the shared one (checked above).
      for (const name of readdirSync(path.join(shared, own[0]!)).filter((n) => n.startsWith("mat-debug-"))) {
        expect(name).toBe(`mat-debug-${server.child.pid}.log`);
      }
    } finally {
      expect(await server.stop()).toBe(0);
    }
    // tsx (which runs the sources here, not the built server) keeps its cache there too.
    expect(readdirSync(shared).filter((name) => !name.startsWith("tsx-"))).toEqual([]);
  }, 180_000);
});
