import { create } from "@bufbuild/protobuf";
import { Code, type Client, ConnectError } from "@connectrpc/connect";
import { ListModelsRequestSchema, type ModelEntry, ModelKind, type RegistryService } from "../../gen/tessera/registry/v1/registry_pb.js";
import { HttpError } from "../errors.js";
import { RATE_ONLY } from "../gate.js";
import type { Route } from "../route.js";
import { createdOf } from "./models.js";

export interface ModelRetrieveDeps {
  registry: Pick<Client<typeof RegistryService>, "listModels" | "resolveModel">;
}

export const MODEL_PATH_PREFIX = "/v1/models/";

/** OpenAI's model object, with the API document's model entry fields beside it. */
export function modelObject(id: string, entry: ModelEntry) {
  return {
    id,
    object: "model",
    created: createdOf(entry.releaseDate),
    owned_by: "tessera",
    name: id,
    description: entry.description,
    release_date: entry.releaseDate,
  };
}

/**
 * GET /v1/models/{id} (`client.models.retrieve`): a model of the listing, or an alias the
 * service accepts (`jev-latest`), as OpenAI's model object; anything else is 404 in OpenAI's
 * error shape, as a client of this endpoint expects.
 */
export function modelRetrieveRoute({ registry }: ModelRetrieveDeps): Route {
  const everyKind = create(ListModelsRequestSchema, { kind: ModelKind.UNSPECIFIED });
  return {
    method: "GET",
    path: `${MODEL_PATH_PREFIX}{id}`,
    errorStyle: "openai",
    charge: RATE_ONLY,
    body: "none",
    async handle(ctx) {
      const url = ctx.req.url ?? "";
      const raw = url.slice(MODEL_PATH_PREFIX.length).split("?")[0] ?? "";
      let id: string;
      try {
        id = decodeURIComponent(raw);
      } catch {
        id = raw;
      }
      const notFound = () =>
        new HttpError(404, "invalid_request_error", `The model '${id.slice(0, 200)}' does not exist`, {
          code: "model_not_found",
          param: "model",
        });
      const { models } = await registry.listModels(everyKind, { signal: ctx.signal });
      const listed = models.find((m) => m.id === id);
      if (listed !== undefined) return { body: modelObject(id, listed) };
      try {
        const resolved = await registry.resolveModel({ model: id }, { signal: ctx.signal });
        if (resolved.model !== undefined && models.some((m) => m.id === resolved.model!.id)) {
          return { body: modelObject(id, resolved.model) };
        }
      } catch (err) {
        if (!(err instanceof ConnectError) || (err.code !== Code.NotFound && err.code !== Code.InvalidArgument)) throw err;
      }
      throw notFound();
    },
  };
}
