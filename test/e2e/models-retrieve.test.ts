// GET /v1/models/{id} with the official `openai` client: `models.retrieve` answers OpenAI's
// model object plus the API document's name, description and release_date; an unknown id is
// a 404 the SDK reads.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";

let tessera: TestTessera;
let client: OpenAI;

beforeAll(async () => {
  tessera = await startTestTessera({ models: "tiny" });
  client = new OpenAI({ apiKey: tessera.key, baseURL: `${tessera.url}/v1`, maxRetries: 0, timeout: 30_000 });
}, 120_000);

afterAll(async () => {
  await tessera?.close();
});

describe("models.retrieve", () => {
  it("answers every listed model as the listing shows it", async () => {
    const listing = (await (await tessera.fetch("/v1/models")).json()) as {
      models: { name: string; description: string; release_date: string }[];
      data: { id: string; created: number }[];
    };
    expect(listing.data.length).toBeGreaterThan(0);
    for (const [i, listed] of listing.data.entries()) {
      const { data: model, response } = await client.models.retrieve(listed.id).withResponse();
      expect(response.headers.get("x-request-id")).toMatch(/^req_/);
      expect(model).toEqual({
        id: listed.id,
        object: "model",
        created: listed.created,
        owned_by: "tessera",
        name: listing.models[i]!.name,
        description: listing.models[i]!.description,
        release_date: listing.models[i]!.release_date,
      });
    }
  });

  it("accepts an alias the service accepts, under the id asked", async () => {
    const model = await client.models.retrieve("jev-latest");
    expect(model.id).toBe("jev-latest");
    expect((model as unknown as { release_date: string }).release_date).toMatch(/^\d{4}-\d{2}-\d{2}$/);
  });

  it("an unknown id is a 404 in OpenAI's shape; no key is 403", async () => {
    const err = await client.models.retrieve("no-such-model").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect((err as InstanceType<typeof OpenAI.NotFoundError>).message).toMatch(/no-such-model/);
    expect((err as InstanceType<typeof OpenAI.NotFoundError>).code).toBe("model_not_found");
    const bare = await tessera.fetch("/v1/models/textmodel-26b", { key: null });
    expect(bare.status).toBe(403);
    expect(((await bare.json()) as { error: { type: string } }).error.type).toBe("authentication_error");
    expect((await tessera.fetch("/v1/models/textmodel-26b", { method: "POST" })).status).toBe(405);
  });
});
