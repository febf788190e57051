import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import {
  ModelEntrySchema,
  ModelKind,
  type RegistryService,
  WorkerSchema,
  type ModelEntry,
  type Worker,
} from "../../gen/tessera/registry/v1/registry_pb.js";
import type { LiveWorker, WorkerDirectory } from "../../lib/heartbeats/types.js";
import type { Catalog, CatalogModel, ListedId } from "./catalog.js";

export interface RegistryDeps {
  /** The catalog, or where to read the current one (it grows when a model is pulled while serving). */
  catalog: Catalog | (() => Catalog);
  /** Live inference workers (heartbeats); a model is listed only while one of them serves it. */
  workers: WorkerDirectory;
  /**
   * Looks for models added since start (pulled while serving) and starts serving them; resolves
   * when the model `id` names, if it is one of them, is served. Awaited before a model is answered
   * "does not exist"; a listing starts a look and answers without waiting.
   */
  lookAgain?: (id?: string) => Promise<void>;
}

const KIND_NAMES: Record<ModelKind, string> = {
  [ModelKind.UNSPECIFIED]: "unspecified",
  [ModelKind.TEXT]: "text",
  [ModelKind.DECISION]: "decision",
};

export function createRegistryService({ catalog: source, workers, lookAgain }: RegistryDeps): ServiceImpl<typeof RegistryService> {
  const current = typeof source === "function" ? source : () => source;
  // Listings per (catalog, filter, set of live serving ids): the set changes rarely, the listing
  // is asked for on every GET /v1/models. Entries are shared: callers must not modify them.
  const listings = new WeakMap<Catalog, Map<string, ModelEntry[]>>();
  return {
    listModels(req) {
      lookAgain?.().catch(() => {}); // a listing answers from the catalog it has, whatever the look finds
      const catalog = current();
      const live = servingIdsOf(workers.live());
      const key = `${req.kind}|${req.includeUnavailable}|${[...live].sort().join("\u0000")}`;
      const ofCatalog = listings.get(catalog) ?? new Map<string, ModelEntry[]>();
      listings.set(catalog, ofCatalog);
      let models = ofCatalog.get(key);
      if (models === undefined) {
        models = catalog.listed
          .filter((listed) => req.kind === ModelKind.UNSPECIFIED || listed.model.kind === req.kind)
          .filter((listed) => req.includeUnavailable || live.has(listed.model.servingId))
          // A pulled model's id names a text and a decision model: listed once.
          .filter((listed, i, all) => all.findIndex((other) => other.id === listed.id) === i)
          .map(entryOf);
        if (ofCatalog.size >= 256) ofCatalog.clear();
        ofCatalog.set(key, models);
      }
      return { models };
    },

    async resolveModel(req) {
      if (req.model === "") throw new ConnectError("model is required", Code.InvalidArgument);
      const kind = req.kind === ModelKind.UNSPECIFIED ? undefined : req.kind;
      let resolution = current().resolve(req.model, kind);
      if (resolution === undefined && lookAgain !== undefined) {
        await lookAgain(req.model);
        resolution = current().resolve(req.model, kind);
      }
      if (resolution === undefined) throw new ConnectError(`model "${req.model}" does not exist`, Code.NotFound);
      const { model } = resolution;
      if (req.kind !== ModelKind.UNSPECIFIED && model.kind !== req.kind) {
        throw new ConnectError(
          `model "${req.model}" is a ${KIND_NAMES[model.kind]} model, not a ${KIND_NAMES[req.kind]} model`,
          Code.InvalidArgument,
        );
      }
      const serving = workers.live().filter((w) => w.models.includes(model.servingId));
      return { model: entryOf({ id: model.id, model, alias: undefined }), workers: serving.map(workerOf) };
    },

    listWorkers() {
      return { workers: workers.live().map(workerOf) };
    },
  };
}

function servingIdsOf(live: LiveWorker[]): Set<string> {
  const ids = new Set<string>();
  for (const worker of live) for (const id of worker.models) ids.add(id);
  return ids;
}

function entryOf({ id, model, alias }: ListedId): ModelEntry {
  return create(ModelEntrySchema, {
    id,
    kind: model.kind,
    family: model.family,
    version: model.version,
    releaseDate: model.releaseDate,
    description: alias ? (alias.description ?? aliasDescription(alias.family, model)) : model.description,
    aliasOf: alias ? model.id : "",
    modelDir: model.modelDir,
    servingId: model.servingId,
  });
}

function aliasDescription(family: string, target: CatalogModel): string {
  return `The newest release of the ${family} family, now ${target.id}: ${target.description}`;
}

function workerOf(worker: LiveWorker): Worker {
  return create(WorkerSchema, {
    id: worker.id,
    address: worker.address,
    models: worker.models,
    slotsTotal: worker.slotsTotal,
    slotsFree: worker.slotsFree,
    lastSeenUnixMs: BigInt(worker.lastSeenUnixMs),
  });
}
