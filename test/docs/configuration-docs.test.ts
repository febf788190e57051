import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { renderConfigurationDoc } from "../../lib/config-docs/render.js";
import { CONFIG_FILE_ENV } from "../../lib/config.js";
import { SETTINGS } from "../../lib/config-settings/index.js";

const root = path.resolve(import.meta.dirname, "../..");

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => path.join(e.parentPath, e.name));
}

describe("docs/configuration.md", () => {
  it("is what the settings table generates (run `npm run docs:config` after changing a setting)", () => {
    expect(readFileSync(path.join(root, "docs/configuration.md"), "utf8")).toBe(renderConfigurationDoc());
  });

  it("names every setting once", () => {
    const names = SETTINGS.map((s) => s.env);
    expect(new Set(names).size).toBe(names.length);
  });

  it("holds every TESSERA_ variable the Helm chart sets", () => {
    // NOTES.txt's TESSERA_KEY is a shell variable of the operator's, not a setting.
    const known = new Set([CONFIG_FILE_ENV, "TESSERA_KEY", ...SETTINGS.map((s) => s.env)]);
    const chart = path.join(root, "deploy/helm/tessera");
    const used = new Map<string, string>();
    for (const file of filesUnder(chart)) {
      for (const match of readFileSync(file, "utf8").matchAll(/\bTESSERA_[A-Z0-9_]+\b/g)) {
        used.set(match[0], path.relative(root, file));
      }
    }
    expect(used.size).toBeGreaterThan(5);
    const unknown = [...used].filter(([name]) => !known.has(name)).map(([name, file]) => `${name} (${file})`);
    expect(unknown).toEqual([]);
  });
});
