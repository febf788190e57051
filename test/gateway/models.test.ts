import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";

let tessera: TestTessera;

beforeAll(async () => {
  tessera = await startTestTessera();
});
afterAll(async () => {
  await tessera?.close();
});

describe("GET /v1/models", () => {
  it("is empty while no worker serves a model", async () => {
    const res = await tessera.fetch("/v1/models");
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ models: [], object: "list", data: [] });
  });

  it("lists the callable ids in both the API document's and OpenAI's shape", async () => {
    const publisher = tessera.announceWorker();
    try {
      const res = await tessera.fetch("/v1/models");
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("application/json");
      expect(res.headers.get("x-service-request-id")).toMatch(/^req_/);
      expect(Number(res.headers.get("x-ratelimit-remaining-requests"))).toBeGreaterThanOrEqual(0);
      const body = (await res.json()) as {
        models: { name: string; description: string; release_date: string }[];
        object: string;
        data: { id: string; object: string; created: number; owned_by: string }[];
      };
      expect(body.models).toEqual([
        { name: "textmodel-26b", description: "the test text model", release_date: "2026-11-22" },
        {
          name: "decisionmodel-latest",
          description: "The newest release of the decisionmodel family, now decisionmodel-0.1: the test decision model",
          release_date: "2026-11-22",
        },
        { name: "decisionmodel-0.1", description: "the test decision model", release_date: "2026-11-22" },
      ]);
      expect(body.object).toBe("list");
      const created = Date.UTC(2026, 10, 22) / 1000;
      expect(body.data).toEqual([
        { id: "textmodel-26b", object: "model", created, owned_by: "tessera" },
        { id: "decisionmodel-latest", object: "model", created, owned_by: "tessera" },
        { id: "decisionmodel-0.1", object: "model", created, owned_by: "tessera" },
      ]);
      expect(JSON.stringify(body)).not.toContain("jev-latest");
    } finally {
      publisher.stop();
    }
  });

  it("works with the official openai client", async () => {
    const publisher = tessera.announceWorker();
    try {
      const client = new OpenAI({ apiKey: tessera.key, baseURL: `${tessera.url}/v1`, maxRetries: 0 });
      const ids: string[] = [];
      for await (const model of client.models.list()) {
        expect(model.object).toBe("model");
        expect(model.owned_by).toBe("tessera");
        ids.push(model.id);
      }
      expect(ids).toEqual(["textmodel-26b", "decisionmodel-latest", "decisionmodel-0.1"]);

      const anonymous = new OpenAI({ apiKey: "tsr_unknown_key_000000000000000000", baseURL: `${tessera.url}/v1`, maxRetries: 0 });
      const err = await anonymous.models.list().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(OpenAI.AuthenticationError);
      expect((err as InstanceType<typeof OpenAI.AuthenticationError>).status).toBe(401);
    } finally {
      publisher.stop();
    }
  });
});
