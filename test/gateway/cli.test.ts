import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { SETTINGS } from "../../lib/config.js";
import { spawnTesseraServe } from "../helpers/serve-process.js";
import { REPO_ROOT } from "../helpers/tessera.js";

const scratch = mkdtempSync(join(tmpdir(), "tessera-cli-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function tessera(args: string[], env: Record<string, string> = {}) {
  const result = spawnSync(process.execPath, ["--import", "tsx", "bin/tessera.ts", ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    encoding: "utf8",
    timeout: 60_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe("the tessera command", () => {
  it("lists every setting with serve --help", () => {
    const { status, stdout } = tessera(["serve", "--help"]);
    expect(status).toBe(0);
    for (const setting of SETTINGS) expect(stdout).toContain(setting.env);
    expect(stdout).toContain("TESSERA_CONFIG");
    expect(stdout).toMatch(/SDAR, Fast-dLLM v2 or DiffusionGemma checkpoint/);
  });

  it("refuses unknown commands, unknown services and service subsets", () => {
    expect(tessera(["frobnicate"]).status).toBe(2);
    const unknown = tessera(["serve", "gatway"]);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toMatch(/unknown service "gatway"/);
    const subset = tessera(["serve", "gateway", "registry"]);
    expect(subset.status).toBe(2);
    expect(subset.stderr).toMatch(/distributed mode/);
  });

  it("reports bad settings clearly and exits 1", () => {
    const { status, stderr } = tessera(["serve"], { TESSERA_PORT: "http", TESSERA_LOG_LEVEL: "chatty" });
    expect(status).toBe(1);
    expect(stderr).toMatch(/TESSERA_PORT \(environment\): must be an integer/);
    expect(stderr).toMatch(/TESSERA_LOG_LEVEL \(environment\): must be one of/);
  });

  it("manages keys in TESSERA_DATA_DIR: create prints the key alone on the last line", () => {
    const env = { TESSERA_DATA_DIR: join(scratch, "keys-data") };
    const created = tessera(["keys", "create", "--name", "ci", "--rpm", "5"], env);
    expect(created.status).toBe(0);
    const lines = created.stdout.trimEnd().split("\n");
    expect(lines.at(-1)).toMatch(/^tsr_[A-Za-z0-9_-]+$/);
    const listed = tessera(["keys", "list"], env);
    expect(listed.status).toBe(0);
    expect(listed.stdout).toContain("ci");
    expect(listed.stdout).not.toContain(lines.at(-1)!);
  });

  it("serves until SIGTERM, then shuts down cleanly", async () => {
    const { url, output, stop } = await spawnTesseraServe({
      TESSERA_DATA_DIR: join(scratch, "serve-data"),
      TESSERA_MODELS_CONFIG: join(REPO_ROOT, "models.config.json"),
    });
    // The first start printed a key (plain text, not a log line).
    const key = output.map((l) => /^\s+(tsr_[A-Za-z0-9_-]+)$/.exec(l)?.[1]).find(Boolean);
    expect(key).toBeDefined();
    const health = await fetch(`${url}/healthz`);
    expect(health.status).toBe(200);
    const models = await fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
    expect(models.status).toBe(200);

    expect(await stop()).toBe(0);
    expect(output.join("\n")).toMatch(/"shut down"/);
  });
});
