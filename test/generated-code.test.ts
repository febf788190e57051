import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join, relative, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const root = resolve(import.meta.dirname, "..");
const scratch = mkdtempSync(join(tmpdir(), "tessera-gen-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function filesUnder(dir: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (at: string) => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      const path = join(at, entry.name);
      if (entry.isDirectory()) walk(path);
      else files.set(relative(dir, path), readFileSync(path, "utf8"));
    }
  };
  walk(dir);
  return files;
}

describe("generated code", () => {
  it("is what `buf generate` makes from proto/ (run `npm run generate` and commit gen/)", () => {
    // The committed buf.gen.yaml, writing to a scratch directory instead of gen/.
    const template = readFileSync(join(root, "buf.gen.yaml"), "utf8");
    expect(template).toMatch(/^\s+out: gen\s*$/m);
    const out = join(scratch, "gen");
    const templatePath = join(scratch, "buf.gen.yaml");
    writeFileSync(templatePath, template.replace(/^(\s+out:) gen\s*$/m, `$1 ${JSON.stringify(out)}`));

    const bin = join(root, "node_modules", ".bin");
    const result = spawnSync(join(bin, "buf"), ["generate", "--template", templatePath], {
      cwd: root,
      env: { ...process.env, PATH: `${bin}${delimiter}${process.env["PATH"] ?? ""}` },
      encoding: "utf8",
      timeout: 120_000,
    });
    expect(result.status, result.stderr).toBe(0);

    const expected = filesUnder(out);
    const committed = filesUnder(join(root, "gen"));
    expect(expected.size).toBeGreaterThan(0);
    expect([...committed.keys()].sort()).toEqual([...expected.keys()].sort());
    for (const [path, text] of expected) expect(committed.get(path), `gen/${path} is stale`).toBe(text);
  });
});
