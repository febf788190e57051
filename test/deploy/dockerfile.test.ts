// The image recipe cannot be built here (no Docker engine), so this reads it: the stages it
// names exist, the runtime is slim, non-root and production-only, and what it promises
// matches what the chart and package.json assume (user id, paths, entry point).
import { readFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const dockerfile = await readFile(join(root, "deploy/docker/Dockerfile"), "utf8");
const ignore = (await readFile(join(root, "deploy/docker/Dockerfile.dockerignore"), "utf8"))
  .split("\n")
  .map((l) => l.trim())
  .filter((l) => l !== "" && !l.startsWith("#"));
const values = parse(await readFile(join(root, "deploy/helm/tessera/values.yaml"), "utf8"));
const pkg = JSON.parse(await readFile(join(root, "package.json"), "utf8"));
const buildTsconfig = JSON.parse(await readFile(join(root, "tsconfig.build.json"), "utf8"));

interface Stage {
  from: string;
  name: string;
  lines: string[];
}

/** Instructions with continuation lines joined, comments dropped, split into stages. */
function stages(text: string): { args: Map<string, string>; stages: Stage[] } {
  const instructions = text
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
  const args = new Map<string, string>();
  const result: Stage[] = [];
  for (const line of instructions) {
    const from = /^FROM\s+(\S+)(?:\s+AS\s+(\S+))?$/i.exec(line);
    if (from) {
      result.push({ from: from[1]!, name: from[2] ?? "", lines: [] });
    } else if (result.length === 0) {
      const arg = /^ARG\s+(\w+)=(\S+)$/.exec(line);
      if (arg) args.set(arg[1]!, arg[2]!);
    } else {
      result.at(-1)!.lines.push(line);
    }
  }
  return { args, stages: result };
}

const { args, stages: all } = stages(dockerfile);
const byName = new Map(all.map((s) => [s.name, s]));
const runtime = all.at(-1)!;
const expand = (text: string) => text.replace(/\$\{(\w+)\}/g, (_, name: string) => args.get(name) ?? `\${${name}}`);
const instruction = (stage: Stage, keyword: string) => stage.lines.filter((l) => l.toUpperCase().startsWith(`${keyword} `));
const ignored = (path: string) =>
  ignore.some((p) => path === p || path.startsWith(`${p}/`) || (p.startsWith("**/") && path.endsWith(p.slice(3))));

describe("deploy/docker/Dockerfile", () => {
  it("ends in a slim Node 20 runtime stage (the default target)", () => {
    expect(runtime.name).toBe("runtime");
    expect(expand(runtime.from)).toBe("node:20-bookworm-slim");
  });

  it("builds with dev dependencies, then keeps only the production ones", () => {
    const build = byName.get("build")!;
    const runs = instruction(build, "RUN").join("\n");
    expect(runs).toMatch(/npm ci\b/);
    expect(runs).toMatch(/npm run build/);
    expect(runs).toMatch(/npm prune --omit=dev/);
    expect(runs.indexOf("npm run build")).toBeLessThan(runs.indexOf("npm prune --omit=dev"));
    // The runtime gets node_modules only from the pruned build stage, never installs anything.
    expect(instruction(runtime, "RUN").join("\n")).not.toMatch(/\bnpm\b/);
    expect(instruction(runtime, "COPY").filter((l) => l.includes("node_modules"))).toEqual([
      "COPY --from=build /src/node_modules ./node_modules",
    ]);
  });

  it("copies only from stages that exist, and only context files that the ignore file lets in", () => {
    for (const stage of all) {
      for (const copy of instruction(stage, "COPY")) {
        const from = /--from=(\S+)/.exec(copy)?.[1];
        if (from) {
          expect(byName.has(from), `${copy}`).toBe(true);
        } else {
          const sources = copy
            .replace(/^COPY\s+(--\S+\s+)*/i, "")
            .split(/\s+/)
            .slice(0, -1);
          for (const source of sources.filter((s) => s !== ".")) {
            expect(existsSync(join(root, source)), source).toBe(true);
            expect(ignored(source), `${source} is ignored`).toBe(false);
          }
        }
      }
    }
    const models = /^FROM\s+models-\$\{MODELS\}/m.test(dockerfile);
    expect(models).toBe(true);
    expect(byName.has(`models-${args.get("MODELS")}`)).toBe(true);
  });

  it("keeps in the build context everything the TypeScript build and the runtime read", () => {
    for (const dir of buildTsconfig.include as string[]) expect(ignored(dir), dir).toBe(false);
    for (const path of [
      "package.json",
      "package-lock.json",
      ".npmrc",
      "tsconfig.json",
      "tsconfig.build.json",
      "models",
      "models.config.json",
    ]) {
      expect(ignored(path), path).toBe(false);
    }
    for (const path of ["node_modules", "dist", ".git", "data", "services/registry/node_modules"]) expect(ignored(path), path).toBe(true);
  });

  it("runs as the non-root user the chart expects, serving on 8080 with a health check", () => {
    for (const stage of [runtime, byName.get("runtime-cuda")!]) {
      const user = instruction(stage, "USER").at(-1);
      expect(user, stage.name).toBe(`USER ${values.default.podSecurityContext.runAsUser}:${values.default.podSecurityContext.runAsGroup}`);
      expect(instruction(stage, "EXPOSE")).toEqual(["EXPOSE 8080"]);
      expect(instruction(stage, "HEALTHCHECK")[0]).toMatch(/\/healthz/);
      expect(instruction(stage, "WORKDIR")).toEqual(["WORKDIR /app"]);
      const env = instruction(stage, "ENV").join(" ");
      expect(env).toMatch(/TESSERA_HOST=0\.0\.0\.0/);
      expect(env).toMatch(/TESSERA_DATA_DIR=\/data/);
      expect(instruction(stage, "COPY").some((l) => l.endsWith("./models"))).toBe(true);
    }
    expect(values.models.imagePath).toBe("/app/models");
  });

  it("starts `node dist/bin/tessera.js serve`, the package's bin", () => {
    const entrypoint = JSON.parse(instruction(runtime, "ENTRYPOINT")[0]!.slice("ENTRYPOINT ".length));
    const cmd = JSON.parse(instruction(runtime, "CMD")[0]!.slice("CMD ".length));
    expect([...entrypoint, ...cmd]).toEqual(["node", pkg.bin.tessera, "serve"]);
    // The chart's args replace CMD only, so `serve <names>` runs under the same entry point.
    expect(values.components.gateway.args[0]).toBe("serve");
  });
});
