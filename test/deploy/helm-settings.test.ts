// The Helm chart's settings against the settings table (lib/config-settings/): every TESSERA_
// variable the chart sets is in the table, and every value it sets (in values.yaml, in each ci
// values file, and as rendered by the real Helm binary) is one the table's parser accepts, so a
// setting renamed or narrowed in the table fails here, naming the chart's file and value.
import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { parse as parseYaml, parseAllDocuments } from "yaml";
import { CONFIG_FILE_ENV, SETTINGS } from "../../lib/config.js";
import { LOG_LEVELS } from "../../lib/logger.js";

const root = path.resolve(import.meta.dirname, "../..");
const chart = path.join(root, "deploy/helm/tessera");
const byEnv = new Map(SETTINGS.map((s) => [s.env, s]));

// biome-ignore lint/suspicious/noExplicitAny: untyped YAML, walked by key
type Obj = Record<string, any>;

/** What is wrong with the chart setting `name` to `value`, or undefined when the table accepts it. */
function mismatch(name: string, value: string): string | undefined {
  const setting = byEnv.get(name);
  if (setting === undefined) return "not in the settings table";
  try {
    setting.parse(value, "/");
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

/** Every `env:` map of a values file, with its path (components.inference.env, default.env…). */
function envMaps(values: unknown, at = ""): [string, Obj][] {
  if (typeof values !== "object" || values === null) return [];
  return Object.entries(values as Obj).flatMap(([key, value]): [string, Obj][] => {
    const where = at === "" ? key : `${at}.${key}`;
    if (key === "env" && typeof value === "object" && value !== null && !Array.isArray(value)) return [[where, value as Obj]];
    return envMaps(value, where);
  });
}

async function valuesFiles(): Promise<string[]> {
  const ci = (await readdir(path.join(chart, "ci"))).filter((f) => f.endsWith(".yaml")).sort();
  return ["values.yaml", ...ci.map((f) => `ci/${f}`)];
}

const run = promisify(execFile);
async function renderAll(): Promise<Map<string, Obj[]> | undefined> {
  const out = await mkdtemp(path.join(tmpdir(), "tessera-helm-settings-"));
  try {
    await run("bash", [path.join(root, "scripts/helm.sh"), "check", out], { timeout: 300_000, maxBuffer: 64 * 1024 * 1024 });
  } catch (err) {
    // Exit status 3: Helm could not be had (no registry, other platform).
    if ((err as { code?: number }).code === 3) return undefined;
    throw err;
  }
  const rendered = new Map<string, Obj[]>();
  for (const file of (await readdir(out)).filter((f) => f.endsWith(".yaml") && !f.endsWith(".lint.yaml"))) {
    const docs = parseAllDocuments(await readFile(path.join(out, file), "utf8")).map((d) => d.toJS() as Obj | null);
    rendered.set(
      file,
      docs.filter((d): d is Obj => d !== null),
    );
  }
  return rendered;
}
const rendered = await renderAll();
if (rendered === undefined) console.warn("SKIPPED the rendered half of test/deploy/helm-settings.test.ts: Helm could not be had");

describe("the Helm chart's settings", () => {
  it("holds every TESSERA_ variable the Helm chart sets", async () => {
    // NOTES.txt's TESSERA_KEY is a shell variable of the operator's, not a setting.
    const known = new Set([CONFIG_FILE_ENV, "TESSERA_KEY", ...SETTINGS.map((s) => s.env)]);
    const files = (await readdir(chart, { withFileTypes: true, recursive: true })).filter((e) => e.isFile());
    const used = new Map<string, string>();
    for (const e of files) {
      const file = path.join(e.parentPath, e.name);
      for (const match of (await readFile(file, "utf8")).matchAll(/\bTESSERA_[A-Z0-9_]+\b/g)) {
        used.set(match[0], path.relative(root, file));
      }
    }
    expect(used.size).toBeGreaterThan(5);
    const unknown = [...used].filter(([name]) => !known.has(name)).map(([name, file]) => `${name} (${file})`);
    expect(unknown).toEqual([]);
  });

  it("sets, in values.yaml and every ci values file, only values the table's parsers accept", async () => {
    const found: string[] = [];
    let checked = 0;
    for (const file of await valuesFiles()) {
      const values = parseYaml(await readFile(path.join(chart, file), "utf8")) as unknown;
      for (const [where, env] of envMaps(values)) {
        for (const [name, value] of Object.entries(env)) {
          if (!name.startsWith("TESSERA_")) continue;
          checked++;
          const wrong = mismatch(name, String(value));
          if (wrong !== undefined) found.push(`${file}: ${where}.${name} = ${JSON.stringify(value)}: ${wrong}`);
        }
      }
    }
    expect(checked).toBeGreaterThan(5);
    expect(found).toEqual([]);
  });

  it("offers only log levels the table accepts (values.schema.json's logLevel)", async () => {
    const schema = JSON.parse(await readFile(path.join(chart, "values.schema.json"), "utf8")) as Obj;
    const levels = schema.properties.logLevel.enum as string[];
    expect(levels.length).toBeGreaterThan(0);
    expect(levels.filter((level) => !(LOG_LEVELS as readonly string[]).includes(level))).toEqual([]);
  });

  it.skipIf(rendered === undefined)("renders, with the defaults and every ci values file, only values the table accepts", () => {
    // Kubernetes substitutes $(POD_IP) and $(POD_NAME) at the pod's start.
    const atStart = (value: string) => value.replaceAll("$(POD_IP)", "10.1.2.3").replaceAll("$(POD_NAME)", "tessera-inference-0");
    const found: string[] = [];
    let checked = 0;
    for (const [file, objects] of rendered ?? []) {
      for (const o of objects) {
        const pod = o.kind === "Pod" ? o.spec : o.spec?.template?.spec;
        for (const c of [...(pod?.containers ?? []), ...(pod?.initContainers ?? [])] as Obj[]) {
          for (const e of (c.env ?? []) as Obj[]) {
            if (!String(e.name).startsWith("TESSERA_")) continue;
            checked++;
            const wrong =
              e.value === undefined ? (byEnv.has(e.name) ? undefined : "not in the settings table") : mismatch(e.name, atStart(e.value));
            if (wrong !== undefined)
              found.push(`${file}: ${o.kind}/${o.metadata.name} ${c.name}: ${e.name}=${JSON.stringify(e.value)}: ${wrong}`);
          }
        }
      }
    }
    expect(checked).toBeGreaterThan(20);
    expect(found).toEqual([]);
  });
});
