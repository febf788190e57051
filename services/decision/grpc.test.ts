// The decision service over real gRPC (HTTP/2 on a loopback port), called with the typed client
// generated from proto/ — as an internal user in another process would call it.
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { readFileSync } from "node:fs";
import type { JsonObject } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { connectNodeAdapter, createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DecisionService, QuestionType, ValidationFailureSchema } from "../../gen/tessera/decision/v1/decision_pb.js";
import { InferenceService } from "../../gen/tessera/inference/v1/inference_pb.js";
import { RegistryService } from "../../gen/tessera/registry/v1/registry_pb.js";
import { silentLogger } from "../../lib/logger.js";
import { decisionRoutes } from "./server.js";
import { fakeInference, fakeRegistry } from "../../test/helpers/decision-doubles.js";

const decisionJson: JsonObject = JSON.parse(readFileSync(new URL("../../training/templates/decision.json", import.meta.url), "utf8"));

describe("DecisionService over gRPC", () => {
  let server: http2.Http2Server;
  let baseUrl: string;
  // The client keeps its HTTP/2 session open; close() would wait for it forever.
  const sessions = new Set<http2.ServerHttp2Session>();

  beforeAll(async () => {
    const fake = fakeInference(decisionJson);
    const registry = createClient(
      RegistryService,
      createRouterTransport(({ service }) => service(RegistryService, fakeRegistry())),
    );
    const inference = createClient(
      InferenceService,
      createRouterTransport(({ service }) => service(InferenceService, fake.impl)),
    );
    server = http2.createServer(
      connectNodeAdapter({ routes: decisionRoutes({ registry, inferenceFor: () => inference, logger: silentLogger() }) }),
    );
    server.on("session", (session) => sessions.add(session));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const session of sessions) session.close();
    await closed;
  });

  it("answers a typed gRPC client, ids of every kind included", async () => {
    const client = createClient(DecisionService, createGrpcTransport({ baseUrl }));
    const res = await client.decide({
      requestId: "grpc-1",
      model: "decisionmodel-latest",
      state: { kind: { case: "stringValue", value: "The invoice is 90 days overdue." } },
      questionList: [
        { id: "__proto__", question: { type: QuestionType.NOUL } },
        {
          id: "priorité",
          question: {
            type: QuestionType.CHOICE,
            criteria: { case: "choice", value: { options: [{ name: "high" }, { name: "low" }] } },
          },
        },
      ],
      questions: { "map id": { type: QuestionType.SCORE, criteria: { case: "score", value: { levels: ["a", "b", "c"] } } } },
    });
    expect(res.model).toBe("decisionmodel-0.1");
    expect(res.answerList.map((a) => a.id)).toEqual(["__proto__", "priorité", "map id"]);
    expect(res.answerList.map((a) => a.answer!.type)).toEqual([QuestionType.NOUL, QuestionType.CHOICE, QuestionType.SCORE]);
    // The map cannot hold "__proto__" in JavaScript; answer_list has it, and nothing was polluted.
    expect(Object.keys(res.answers).sort()).toEqual(["map id", "priorité"]);
    expect(Object.getPrototypeOf(res.answers)).toBe(Object.prototype);
    expect(res.usage!.inputTokens).toBeGreaterThan(0);
    expect(res.usage!.outputTokens).toBe(0);
  });

  it("sends every validation problem as a ValidationFailure detail over the wire", async () => {
    const client = createClient(DecisionService, createGrpcTransport({ baseUrl }));
    const err = await client.decide({ model: "jev-latest", questionList: [{ id: "q", question: { type: QuestionType.CHOICE } }] }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(err?.code).toBe(Code.InvalidArgument);
    const [detail] = err!.findDetails(ValidationFailureSchema);
    expect(detail!.violations.map((v) => v.loc)).toEqual([
      ["body", "state"],
      ["body", "questions", "q", "criteria"],
    ]);
  });
});
