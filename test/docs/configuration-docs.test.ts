import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { renderConfigurationDoc } from "../../lib/config-docs/render.js";
import { SETTINGS } from "../../lib/config-settings/index.js";

const root = path.resolve(import.meta.dirname, "../..");

describe("docs/configuration.md", () => {
  it("is what the settings table generates (run `npm run docs:config` after changing a setting)", () => {
    expect(readFileSync(path.join(root, "docs/configuration.md"), "utf8")).toBe(renderConfigurationDoc());
  });

  it("names every setting once", () => {
    const names = SETTINGS.map((s) => s.env);
    expect(new Set(names).size).toBe(names.length);
  });
});
