import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ModelKind } from "../../gen/tessera/registry/v1/registry_pb.js";
import { Catalog, type CatalogModel, loadCatalog } from "./catalog.js";

// Models `tessera pull` put in the data directory, one folder per repository:
//   <data>/models/<org>--<name>/manifest.json     what is served (this file)
//   <data>/models/<org>--<name>/<commit>-<weights>[-b<N>]/   a conversion, cached by (repo, commit, weights, block size)
//   <data>/models/<org>--<name>/<commit>/          a Tessera model repository, hard links to the HF cache's blobs
// The checkpoint itself stays in the Hugging Face cache. The catalog reads the manifests at
// start: each model is served under its repo id (text and decisions), its aliases beside it.

export interface PulledFile {
  path: string;
  size: number;
  etag: string;
  lfs: boolean;
}

export interface PulledManifest {
  version: 1;
  repo: string;
  /** What was asked for (`main`, a tag, a commit). */
  revision: string;
  commit: string;
  /** The converted model's family (sdar, fast_dllm_v2, …), or a Tessera repository's model_type. */
  family: string;
  /** int8 / int4 / fp16 / fp32 for a conversion; "published" for a Tessera model repository. */
  weights: string;
  blockSize: number | undefined;
  aliases: string[];
  /** The model directory served (absolute). */
  path: string;
  /** Bytes of the model directory (the checkpoint's are in the HF cache). */
  sizeBytes: number;
  /** Bytes of the checkpoint in the HF cache. */
  checkpointBytes: number;
  source: "converted" | "tessera";
  /** The revision's files, verified when they were fetched or found (offline pulls check them). */
  files: PulledFile[];
  pulledAt: string;
}

export function modelsRoot(dataDir: string): string {
  return join(dataDir, "models");
}

export function pulledFolder(dataDir: string, repo: string): string {
  return join(modelsRoot(dataDir), repo.replace("/", "--"));
}

export function readManifest(dataDir: string, repo: string): PulledManifest | undefined {
  return readManifestFile(join(pulledFolder(dataDir, repo), "manifest.json"));
}

function readManifestFile(file: string): PulledManifest | undefined {
  try {
    const m = JSON.parse(readFileSync(file, "utf8")) as PulledManifest;
    return m.version === 1 && typeof m.repo === "string" && typeof m.path === "string" ? m : undefined;
  } catch {
    return undefined;
  }
}

export function writeManifest(dataDir: string, manifest: PulledManifest): void {
  const folder = pulledFolder(dataDir, manifest.repo);
  mkdirSync(folder, { recursive: true });
  const file = join(folder, "manifest.json");
  writeFileSync(`${file}.tmp`, `${JSON.stringify(manifest, null, 2)}\n`);
  renameSync(`${file}.tmp`, file);
}

/** Every pulled model of the data directory, by repo id. */
export function listPulled(dataDir: string): PulledManifest[] {
  const root = modelsRoot(dataDir);
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .sort()
    .map((name) => readManifestFile(join(root, name, "manifest.json")))
    .filter((m): m is PulledManifest => m !== undefined);
}

/** The catalog entries of a pulled model: a text model and a decision model under the repo id, with its aliases. */
export function pulledCatalogModels(m: PulledManifest): CatalogModel[] {
  const base = {
    family: m.family,
    version: m.commit.slice(0, 12),
    releaseDate: m.pulledAt.slice(0, 10),
    description: `${m.repo}@${m.commit.slice(0, 12)}, ${m.source === "converted" ? `converted to ${m.weights}` : "a Tessera model"} by tessera pull`,
    modelDir: m.path,
    servingId: m.repo,
    aliases: m.aliases,
  };
  return [
    { ...base, id: m.repo, kind: ModelKind.TEXT },
    { ...base, id: m.repo, kind: ModelKind.DECISION, aliases: [] },
  ];
}

/**
 * The catalog with pulled models joined: `only` set (serve --model), just those; else the
 * models config's (when there is one) and every pulled model. An id the config already
 * uses is not taken by a pulled model.
 */
export function withPulled(config: Catalog | undefined, pulled: readonly PulledManifest[]): Catalog {
  const base = config?.models ?? [];
  const taken = idsTakenBy(config);
  const added = pulled.filter((m) => !taken.has(m.repo)).flatMap(pulledCatalogModels);
  return new Catalog([...base, ...added], config?.latest ?? []);
}

/** The ids and aliases of a models config: a pulled model under one of them is not served. */
export function idsTakenBy(config: Catalog | undefined): Set<string> {
  return new Set((config?.models ?? []).flatMap((m) => [m.id, ...m.aliases]));
}

/** The models config `tessera serve` starts from: the file; none where models were pulled and there is no file. */
export function configCatalog(modelsConfig: string, anyPulled: boolean): Catalog | undefined {
  return anyPulled && !existsSync(modelsConfig) ? undefined : loadCatalog(modelsConfig);
}

/**
 * What `tessera serve` serves: the models config, joined by every pulled model of the data
 * directory. With pulled models and no models config file, those alone.
 */
export function servedCatalog(modelsConfig: string, dataDir: string): Catalog {
  const pulled = listPulled(dataDir);
  return withPulled(configCatalog(modelsConfig, pulled.length > 0), pulled);
}
