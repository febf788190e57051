import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AccountingService } from "../../gen/tessera/accounting/v1/accounting_pb.js";
import { DecisionService } from "../../gen/tessera/decision/v1/decision_pb.js";
import { RegistryService } from "../../gen/tessera/registry/v1/registry_pb.js";
import { startTestTessera, type TestTessera } from "../helpers/tessera.js";
import { roomInThisMinute } from "../helpers/clock-minute.js";

let tessera: TestTessera;

beforeAll(async () => {
  tessera = await startTestTessera();
  tessera.announceWorker();
});
afterAll(async () => {
  await tessera?.close();
});

const bearer =
  (key: string | undefined): Interceptor =>
  (next) =>
  (req) => {
    if (key !== undefined) req.header.set("authorization", `Bearer ${key}`);
    return next(req);
  };

function transport(key: string | undefined, kind: "connect" | "grpc-web" = "connect") {
  const options = { baseUrl: tessera.url, httpVersion: "1.1" as const, interceptors: [bearer(key)] };
  return kind === "connect" ? createConnectTransport(options) : createGrpcWebTransport(options);
}

async function codeOf(promise: Promise<unknown>): Promise<Code | undefined> {
  try {
    await promise;
  } catch (err) {
    return ConnectError.from(err).code;
  }
  return undefined;
}

describe("typed clients on the public port", () => {
  it("reach the registry over Connect and gRPC-Web with a key", async () => {
    for (const kind of ["connect", "grpc-web"] as const) {
      const registry = createClient(RegistryService, transport(tessera.key, kind));
      const listing = await registry.listModels({});
      expect(listing.models.map((m) => m.id)).toEqual(["textmodel-26b", "decisionmodel-latest", "decisionmodel-0.1"]);
      const resolved = await registry.resolveModel({ model: "jev-latest" });
      expect(resolved.model?.id).toBe("decisionmodel-0.1");
    }
  });

  it("log one line per call, with the key id", async () => {
    const key = await tessera.createKey();
    const registry = createClient(RegistryService, transport(key.apiKey));
    await registry.listWorkers({});
    await new Promise((resolve) => setTimeout(resolve, 50));
    const line = tessera.logs
      .map((l) => JSON.parse(l) as { msg: string; rpc?: string; keyId?: string; route?: string; status?: number })
      .find((l) => l.msg === "request" && l.keyId === key.keyId);
    expect(line).toMatchObject({ route: "connect", rpc: "tessera.registry.v1.RegistryService/ListWorkers", status: 200 });
  });

  it("pass the same gate as HTTP callers: key required, per-minute limit", async () => {
    const anonymous = createClient(RegistryService, transport(undefined));
    expect(await codeOf(anonymous.listModels({}))).toBe(Code.Unauthenticated);
    const unknown = createClient(RegistryService, transport("tsr_not_a_key_0000000000000000"));
    expect(await codeOf(unknown.listModels({}))).toBe(Code.Unauthenticated);

    const key = await tessera.createKey({ rpm: 1 });
    const limited = createClient(RegistryService, transport(key.apiKey));
    await roomInThisMinute(5_000);
    await limited.listModels({});
    expect(await codeOf(limited.listModels({}))).toBe(Code.ResourceExhausted);
  });

  it("reach decisions, which fail Unavailable while no worker can answer", async () => {
    const decision = createClient(DecisionService, transport(tessera.key));
    const code = await codeOf(
      decision.decide({
        model: "decisionmodel-latest",
        state: { kind: { case: "stringValue", value: "s" } },
        questionList: [{ id: "q", question: { type: 1 } }],
      }),
    );
    expect(code).toBe(Code.Unavailable);
  });

  it("never reach accounting: its paths are not served here", async () => {
    const accounting = createClient(AccountingService, transport(tessera.key));
    expect(await codeOf(accounting.listKeys({}))).toBe(Code.Unimplemented);
    expect(await codeOf(accounting.authenticate({ apiKey: tessera.key }))).toBe(Code.Unimplemented);
    const raw = await tessera.fetch("/tessera.accounting.v1.AccountingService/CreateKey", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(raw.status).toBe(404);
    expect(raw.headers.get("x-service-request-id")).toMatch(/^req_/);
    expect(((await raw.json()) as { detail: { error_type: string } }).detail.error_type).toBe("not_found_error");
  });
});
