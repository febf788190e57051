import { create } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import { ListModelsRequestSchema, ModelKind, type ModelEntry, type RegistryService } from "../../gen/tessera/registry/v1/registry_pb.js";
import { RATE_ONLY } from "../gate.js";
import type { JsonReply, Route } from "../route.js";

export interface ModelsRouteDeps {
  registry: Pick<Client<typeof RegistryService>, "listModels">;
}

const createdCache = new Map<string, number>();

/** Seconds since the epoch of a YYYY-MM-DD release date (OpenAI's `created`). */
export function createdOf(releaseDate: string): number {
  let created = createdCache.get(releaseDate);
  if (created === undefined) {
    const ms = Date.parse(`${releaseDate}T00:00:00Z`);
    created = Number.isNaN(ms) ? 0 : Math.floor(ms / 1000);
    if (createdCache.size < 10_000) createdCache.set(releaseDate, created);
  }
  return created;
}

/**
 * The listing in both shapes at once: the API document's `models` (name, description,
 * release_date) and OpenAI's `object: "list"` + `data`, so `openai.models.list()` works.
 */
export function modelsListingJson(entries: readonly ModelEntry[]) {
  return {
    models: entries.map((m) => ({ name: m.id, description: m.description, release_date: m.releaseDate })),
    object: "list",
    data: entries.map((m) => ({ id: m.id, object: "model", created: createdOf(m.releaseDate), owned_by: "tessera" })),
  };
}

/**
 * GET /v1/models: the models a live worker can answer now. The registry is asked once per
 * turn of the event loop, not once per request: requests handled in the same turn get the
 * same answer, as if they had arrived together. The serialized listing is reused while the
 * registry answers with the very same entries (it does, in-process, until the set of live
 * models changes), and so are its bytes.
 */
export function modelsRoute({ registry }: ModelsRouteDeps): Route {
  let last: { entries: readonly ModelEntry[]; reply: JsonReply } | undefined;
  let thisTurn: Promise<JsonReply> | undefined;
  const endTurn = () => (thisTurn = undefined);
  // Made once: a message passed to a client is used as it is, an object literal is copied into a new one.
  const everyKind = create(ListModelsRequestSchema, { kind: ModelKind.UNSPECIFIED });
  const sameEntries = (a: readonly ModelEntry[], b: readonly ModelEntry[]) =>
    a.length === b.length && a.every((entry, i) => entry === b[i]);
  const listing = async (): Promise<JsonReply> => {
    const { models } = await registry.listModels(everyKind);
    if (last === undefined || !sameEntries(last.entries, models)) {
      const json = JSON.stringify(modelsListingJson(models));
      last = { entries: [...models], reply: { body: undefined, json, bytes: Buffer.from(json) } };
    }
    return last.reply;
  };
  return {
    method: "GET",
    path: "/v1/models",
    errorStyle: "detail",
    charge: RATE_ONLY,
    body: "none",
    // The same reply (never changed by the gateway) for every request of the turn.
    handle() {
      if (thisTurn === undefined) {
        thisTurn = listing();
        setImmediate(endTurn);
      }
      return thisTurn;
    },
  };
}
