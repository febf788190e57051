import { readFileSync } from "node:fs";
import { basename, dirname, isAbsolute, resolve } from "node:path";
import { ModelKind } from "../../gen/tessera/registry/v1/registry_pb.js";

/** One released model version, as the models config describes it. */
export interface CatalogModel {
  id: string;
  kind: ModelKind.TEXT | ModelKind.DECISION;
  family: string;
  version: string;
  /** YYYY-MM-DD. */
  releaseDate: string;
  description: string;
  /** Absolute path of the model directory. */
  modelDir: string;
  /** The id inference workers know the loaded model by; ids with the same directory share it. */
  servingId: string;
  /** Further ids that name exactly this version; accepted, not listed. */
  aliases: string[];
  /** The unmasking policy spec its replies decode with, when the entry names one (`unmask_policy`). */
  unmaskPolicy?: string;
  /** ONNX Runtime providers of its model, over the server's TESSERA_EXECUTION_PROVIDERS (`execution_providers`). */
  executionProviders?: ("cpu" | "cuda" | "webgpu")[];
}

/** An id that follows the newest release (by release date) of a family. */
export interface LatestAlias {
  id: string;
  family: string;
  description: string | undefined;
  /** Further ids for this alias (e.g. jev-latest); accepted, not listed. */
  aliases: string[];
}

/** What an id resolves to: the versioned model, and the listed alias it came through if any. */
export interface Resolution {
  model: CatalogModel;
  /** The listed alias id (e.g. decisionmodel-latest) when the id was one of its names. */
  latestAlias: LatestAlias | undefined;
}

/** An id as the listing shows it: a version, or a latest alias with the version it points to. */
export interface ListedId {
  id: string;
  model: CatalogModel;
  alias: LatestAlias | undefined;
}

export class CatalogError extends Error {
  constructor(
    readonly source: string,
    readonly problems: string[],
  ) {
    super(`invalid models config ${source}:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "CatalogError";
  }
}

/** The model catalog: which ids exist, what they resolve to, and in which order they are listed. */
export class Catalog {
  private readonly byId = new Map<string, Resolution>();
  /** By kind and id: a pulled model is a text and a decision model under one id (registry/pulled.ts). */
  private readonly byKind = new Map<string, Resolution>();
  readonly listed: readonly ListedId[];

  constructor(
    readonly models: readonly CatalogModel[],
    readonly latest: readonly LatestAlias[],
  ) {
    for (const model of models) {
      for (const id of [model.id, ...model.aliases]) {
        const resolution = { model, latestAlias: undefined };
        this.byKind.set(`${model.kind}|${id}`, resolution);
        // One id of two kinds: the first (text) answers a request that names no kind.
        const other = this.byId.get(id);
        if (other === undefined || other.model.kind === model.kind) this.byId.set(id, resolution);
      }
    }
    const listed: ListedId[] = [];
    const placed = new Set<LatestAlias>();
    for (const model of models) {
      // Each latest alias is listed just before the first version of its family.
      for (const alias of latest) {
        if (alias.family === model.family && !placed.has(alias)) {
          placed.add(alias);
          listed.push({ id: alias.id, model: newestOf(models, alias.family), alias });
        }
      }
      listed.push({ id: model.id, model, alias: undefined });
    }
    for (const alias of latest) {
      const resolution = { model: newestOf(models, alias.family), latestAlias: alias };
      for (const id of [alias.id, ...alias.aliases]) this.byId.set(id, resolution);
    }
    this.listed = listed;
  }

  /** The model an id names; with a kind, that kind's where the id names one of each. */
  resolve(id: string, kind?: ModelKind): Resolution | undefined {
    return (kind === undefined ? undefined : this.byKind.get(`${kind}|${id}`)) ?? this.byId.get(id);
  }

  /** Every distinct model directory with the serving id its versions share (and its unmasking policy, if named). */
  servedModels(): { servingId: string; dir: string; unmaskPolicy?: string; executionProviders?: CatalogModel["executionProviders"] }[] {
    const seen = new Map<string, { dir: string; unmaskPolicy?: string; executionProviders?: CatalogModel["executionProviders"] }>();
    for (const model of this.models) {
      const policy = seen.get(model.servingId)?.unmaskPolicy ?? model.unmaskPolicy;
      const providers = seen.get(model.servingId)?.executionProviders ?? model.executionProviders;
      seen.set(model.servingId, {
        dir: model.modelDir,
        ...(policy !== undefined ? { unmaskPolicy: policy } : {}),
        ...(providers !== undefined ? { executionProviders: providers } : {}),
      });
    }
    return [...seen].map(([servingId, served]) => ({ servingId, ...served }));
  }
}

/** Newest release date wins; on a tie, the version listed later in the config. */
function newestOf(models: readonly CatalogModel[], family: string): CatalogModel {
  let newest: CatalogModel | undefined;
  for (const model of models) {
    if (model.family === family && (newest === undefined || model.releaseDate >= newest.releaseDate)) newest = model;
  }
  if (newest === undefined) throw new Error(`no model of family ${family}`);
  return newest;
}

const ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const MODEL_FIELDS = new Set([
  "id",
  "kind",
  "family",
  "version",
  "release_date",
  "description",
  "model_dir",
  "serving_id",
  "aliases",
  "unmask_policy",
  "execution_providers",
]);
const LATEST_FIELDS = new Set(["id", "family", "description", "aliases"]);

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isDate(text: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(text)) return false;
  const date = new Date(`${text}T00:00:00Z`);
  return !Number.isNaN(date.getTime()) && date.toISOString().startsWith(text);
}

/**
 * Checks a parsed models config and builds the catalog. `baseDir` resolves relative model
 * directories (the config file's own directory). Lists every problem at once.
 */
export function parseCatalog(config: unknown, baseDir: string, source = "(inline)"): Catalog {
  const problems: string[] = [];
  const models: CatalogModel[] = [];
  const latest: LatestAlias[] = [];
  const taken = new Set<string>();

  const claim = (id: unknown, where: string): id is string => {
    if (typeof id !== "string" || !ID.test(id)) {
      problems.push(`${where}: id must be 1-128 letters, digits, . _ : - (starting with a letter or digit), got ${JSON.stringify(id)}`);
      return false;
    }
    if (taken.has(id)) {
      problems.push(`${where}: id "${id}" is used twice`);
      return false;
    }
    taken.add(id);
    return true;
  };
  const text = (entry: Record<string, unknown>, field: string, where: string, required = true): string | undefined => {
    const value = entry[field];
    if (value === undefined && !required) return undefined;
    if (typeof value !== "string" || value.trim() === "") {
      problems.push(`${where}: "${field}" must be a non-empty string`);
      return undefined;
    }
    return value;
  };
  const aliasList = (entry: Record<string, unknown>, where: string): string[] => {
    const value = entry["aliases"];
    if (value === undefined) return [];
    if (!Array.isArray(value)) {
      problems.push(`${where}: "aliases" must be an array of ids`);
      return [];
    }
    return value.filter((alias, i): alias is string => claim(alias, `${where}.aliases[${i}]`));
  };

  if (!isObject(config)) throw new CatalogError(source, ['must be a JSON object with a "models" array']);
  for (const field of Object.keys(config)) {
    if (field !== "models" && field !== "latest") problems.push(`unknown field "${field}" (models, latest)`);
  }
  const rawModels = config["models"];
  if (!Array.isArray(rawModels) || rawModels.length === 0) problems.push(`"models" must be a non-empty array`);

  const dirOfServingId = new Map<string, string>();
  const policyOfServingId = new Map<string, string>();
  for (const [i, entry] of (Array.isArray(rawModels) ? rawModels : []).entries()) {
    const where = `models[${i}]`;
    if (!isObject(entry)) {
      problems.push(`${where}: must be an object`);
      continue;
    }
    for (const field of Object.keys(entry)) {
      if (!MODEL_FIELDS.has(field)) problems.push(`${where}: unknown field "${field}"`);
    }
    const id = entry["id"];
    const idOk = claim(id, where);
    const kind = entry["kind"] === "text" ? ModelKind.TEXT : entry["kind"] === "decision" ? ModelKind.DECISION : undefined;
    if (kind === undefined) problems.push(`${where}: "kind" must be "text" or "decision"`);
    const family = text(entry, "family", where);
    const version = text(entry, "version", where);
    const releaseDate = text(entry, "release_date", where);
    if (releaseDate !== undefined && !isDate(releaseDate))
      problems.push(`${where}: "release_date" must be a date YYYY-MM-DD, got "${releaseDate}"`);
    const description = text(entry, "description", where);
    const rawDir = text(entry, "model_dir", where);
    const modelDir = rawDir === undefined ? undefined : isAbsolute(rawDir) ? rawDir : resolve(baseDir, rawDir);
    const servingId = entry["serving_id"] === undefined ? modelDir && basename(modelDir) : text(entry, "serving_id", where);
    if (servingId !== undefined && modelDir !== undefined) {
      const other = dirOfServingId.get(servingId);
      if (other !== undefined && other !== modelDir) {
        problems.push(`${where}: serving id "${servingId}" already names ${other}; give this model a distinct "serving_id"`);
      }
      dirOfServingId.set(servingId, modelDir);
    }
    const aliases = aliasList(entry, where);
    const unmaskPolicy = entry["unmask_policy"] === undefined ? undefined : text(entry, "unmask_policy", where);
    if (unmaskPolicy !== undefined && servingId !== undefined) {
      const other = policyOfServingId.get(servingId);
      if (other !== undefined && other !== unmaskPolicy) {
        problems.push(
          `${where}: serving id "${servingId}" already decodes with unmask_policy "${other}"; models sharing a serving id share its policy`,
        );
      }
      policyOfServingId.set(servingId, unmaskPolicy);
    }
    const executionProviders = providerList(entry, where, problems);
    if (idOk && kind !== undefined && family && version && releaseDate && description && modelDir && servingId) {
      models.push({
        id,
        kind,
        family,
        version,
        releaseDate,
        description,
        modelDir,
        servingId,
        aliases,
        ...(unmaskPolicy !== undefined ? { unmaskPolicy } : {}),
        ...(executionProviders !== undefined ? { executionProviders } : {}),
      });
    }
  }

  const rawLatest = config["latest"] ?? [];
  if (!Array.isArray(rawLatest)) problems.push(`"latest" must be an array`);
  for (const [i, entry] of (Array.isArray(rawLatest) ? rawLatest : []).entries()) {
    const where = `latest[${i}]`;
    if (!isObject(entry)) {
      problems.push(`${where}: must be an object`);
      continue;
    }
    for (const field of Object.keys(entry)) {
      if (!LATEST_FIELDS.has(field)) problems.push(`${where}: unknown field "${field}"`);
    }
    const id = entry["id"];
    const idOk = claim(id, where);
    const family = text(entry, "family", where);
    if (family !== undefined && !models.some((m) => m.family === family)) problems.push(`${where}: no model has family "${family}"`);
    const description = text(entry, "description", where, false);
    const aliases = aliasList(entry, where);
    if (idOk && family) latest.push({ id, family, description, aliases });
  }

  if (problems.length > 0) throw new CatalogError(source, problems);
  return new Catalog(models, latest);
}

/** Reads and checks a models config file. */
export function loadCatalog(path: string): Catalog {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new CatalogError(path, [(err as Error).message]);
  }
  return parseCatalog(parsed, dirname(path), path);
}

/** A model entry's `execution_providers`: a non-empty list of cpu, webgpu, cuda, each once. */
function providerList(entry: Record<string, unknown>, where: string, problems: string[]): CatalogModel["executionProviders"] {
  const raw = entry["execution_providers"];
  if (raw === undefined) return undefined;
  const known = ["cpu", "cuda", "webgpu"] as const;
  const ok =
    Array.isArray(raw) &&
    raw.length > 0 &&
    raw.every((p) => typeof p === "string" && (known as readonly string[]).includes(p)) &&
    new Set(raw).size === raw.length;
  if (!ok) {
    problems.push(`${where}: "execution_providers" must be a list of distinct providers among cpu, webgpu, cuda (e.g. ["webgpu"])`);
    return undefined;
  }
  return raw as ("cpu" | "cuda" | "webgpu")[];
}
