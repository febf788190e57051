import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, SETTINGS, loadConfig, readSetting, settingInEnvironment, settingsHelp } from "./config.js";

function problems(env: Record<string, string>): string[] {
  try {
    loadConfig({ env, cwd: "/work" });
  } catch (err) {
    if (err instanceof ConfigError) return err.problems;
    throw err;
  }
  return [];
}

describe("loadConfig", () => {
  it("has the documented defaults", () => {
    const config = loadConfig({ env: {}, cwd: "/srv/tessera" });
    expect(config).toMatchObject({
      server: { host: "127.0.0.1", port: 8080, logLevel: "info" },
      storage: { dataDir: "/srv/tessera/data", modelsConfig: "/srv/tessera/models.config.json" },
      engine: { executionProviders: ["cpu"] },
      decoding: { threshold: undefined, unmaskPolicy: undefined },
      grammar: { cacheSize: 64, compileBudgetMs: 5000, workers: 6 },
      accounting: { bootstrapKey: undefined, defaultRequestsPerMinute: 60 },
      cluster: { natsUrl: undefined },
    });
    expect(config.engine.intraOpThreads).toBeGreaterThan(0);
  });

  it("reads the environment", () => {
    const config = loadConfig({
      env: {
        TESSERA_HOST: "0.0.0.0",
        TESSERA_PORT: "0",
        TESSERA_DATA_DIR: "/var/lib/tessera",
        TESSERA_BOOTSTRAP_KEY: "tsr_abcdefghijklmnopqrstuvwxyz012345",
        TESSERA_DEFAULT_RPM: "600",
        TESSERA_SLOTS: "8",
        TESSERA_QUEUE: "0",
        TESSERA_INTRA_OP_THREADS: "2",
        TESSERA_EXECUTION_PROVIDERS: "cuda, CPU",
        TESSERA_UNMASK_THRESHOLD: "1",
        TESSERA_UNMASK_POLICY: " fill(0.7) + threshold(confidence=0.9) ",
        TESSERA_GRAMMAR_CACHE: "8",
        TESSERA_GRAMMAR_COMPILE_BUDGET_MS: "250",
        TESSERA_LOG_LEVEL: "WARN",
        TESSERA_NATS_URL: "nats://nats:4222",
      },
      cwd: "/work",
    });
    expect(config).toMatchObject({
      server: { host: "0.0.0.0", port: 0, logLevel: "warn" },
      storage: { dataDir: "/var/lib/tessera" },
      limits: { slots: 8, queue: 0 },
      engine: { intraOpThreads: 2, executionProviders: ["cuda", "cpu"] },
      decoding: { threshold: 1, unmaskPolicy: "fill(0.7) + threshold(confidence=0.9)" },
      grammar: { cacheSize: 8, compileBudgetMs: 250, workers: 6 },
      accounting: { bootstrapKey: "tsr_abcdefghijklmnopqrstuvwxyz012345", defaultRequestsPerMinute: 600 },
      cluster: { natsUrl: "nats://nats:4222" },
    });
  });

  it("reads CORS origins, and refuses what is not an origin", () => {
    expect(loadConfig({ env: {} }).gateway.corsOrigins).toEqual([]);
    expect(loadConfig({ env: { TESSERA_CORS_ORIGINS: "https://a.example, http://localhost:5173" } }).gateway.corsOrigins).toEqual([
      "https://a.example",
      "http://localhost:5173",
    ]);
    expect(loadConfig({ env: { TESSERA_CORS_ORIGINS: "*" } }).gateway.corsOrigins).toEqual(["*"]);
    expect(() => loadConfig({ env: { TESSERA_CORS_ORIGINS: "https://a.example/" } })).toThrow(/TESSERA_CORS_ORIGINS.*not an origin/s);
    expect(() => loadConfig({ env: { TESSERA_CORS_ORIGINS: "a.example" } })).toThrow(/TESSERA_CORS_ORIGINS/);
  });

  it("names every bad value at once", () => {
    const found = problems({
      TESSERA_PORT: "80a",
      TESSERA_DEFAULT_RPM: "0",
      TESSERA_EXECUTION_PROVIDERS: "tpu",
      TESSERA_UNMASK_THRESHOLD: "0",
      TESSERA_UNMASK_POLICY: "threshold((0.9)",
      TESSERA_LOG_LEVEL: "loud",
      TESSERA_BOOTSTRAP_KEY: "secret",
      TESSERA_NATS_URL: "localhost:4222",
      TESSERA_DATA_DIR: "",
    });
    expect(found).toHaveLength(9);
    expect(found.join("\n")).toMatch(/TESSERA_UNMASK_POLICY \(environment\): must be components joined by +/);
    expect(found.join("\n")).toMatch(/TESSERA_PORT \(environment\): must be an integer, got "80a"/);
    expect(found.join("\n")).toMatch(/TESSERA_DEFAULT_RPM \(environment\): must be between 1 and/);
    expect(found.join("\n")).toMatch(/unknown provider "tpu"/);
    expect(found.join("\n")).toMatch(/TESSERA_BOOTSTRAP_KEY .*tsr_/);
    expect(() => loadConfig({ env: { TESSERA_PORT: "70000" } })).toThrow(/TESSERA_PORT.*between 0 and 65535/s);
  });

  it("reads a JSON file named by TESSERA_CONFIG; the environment wins; paths are relative to the file", () => {
    const dir = mkdtempSync(join(tmpdir(), "tessera-config-"));
    const file = join(dir, "tessera.json");
    writeFileSync(
      file,
      JSON.stringify({
        TESSERA_PORT: 9090,
        TESSERA_DATA_DIR: "state",
        TESSERA_EXECUTION_PROVIDERS: ["cuda", "cpu"],
        TESSERA_HOST: "0.0.0.0",
      }),
    );
    const config = loadConfig({ env: { TESSERA_CONFIG: file, TESSERA_HOST: "::1" }, cwd: "/elsewhere" });
    expect(config).toMatchObject({
      server: { port: 9090, host: "::1" },
      storage: { dataDir: join(dir, "state") },
      engine: { executionProviders: ["cuda", "cpu"] },
    });

    writeFileSync(file, JSON.stringify({ TESSERA_PROT: 1 }));
    expect(() => loadConfig({ env: { TESSERA_CONFIG: file } })).toThrow(/unknown setting "TESSERA_PROT"/);
    writeFileSync(file, "{ not json");
    expect(() => loadConfig({ env: { TESSERA_CONFIG: file } })).toThrow(ConfigError);
  });

  it("reads one setting from the environment through its entry, and says whether the environment gives it", () => {
    expect(readSetting("engine", "ortWorker", {})).toBe(true);
    expect(readSetting("engine", "ortWorker", { TESSERA_ORT_WORKER: "off" })).toBe(false);
    expect(() => readSetting("engine", "ortWorker", { TESSERA_ORT_WORKER: "maybe" })).toThrow(
      /TESSERA_ORT_WORKER \(environment\): must be on or off/,
    );
    expect(settingInEnvironment("accounting", "defaultRequestsPerMinute", {})).toBe(false);
    expect(settingInEnvironment("accounting", "defaultRequestsPerMinute", { TESSERA_DEFAULT_RPM: "60" })).toBe(true);
  });

  it("documents every setting in the help", () => {
    const help = settingsHelp();
    for (const setting of SETTINGS) expect(help).toContain(setting.env);
    expect(help).toContain("TESSERA_CONFIG");
    expect(help).toContain("[default: 8080]");
  });
});

describe("distributed-mode settings", () => {
  it("default to none, with the documented timeouts", () => {
    const config = loadConfig({ env: {}, cwd: "/work" });
    expect(config).toMatchObject({
      accounting: { usageAckWaitMs: 30_000 },
      cluster: {
        accountingUrls: [],
        registryUrls: [],
        decisionUrls: [],
        advertiseUrl: undefined,
        adminToken: undefined,
        internalToken: undefined,
        natsTimeoutMs: 2000,
        natsReplicas: 1,
      },
    });
  });

  it("reads the variables the Helm chart sets: URL lists, the advertised address, the tokens", () => {
    const config = loadConfig({
      env: {
        TESSERA_ACCOUNTING_URL: "http://tessera-accounting:8080/, http://10.0.0.7:8080",
        TESSERA_REGISTRY_URL: "http://tessera-registry:8080",
        TESSERA_DECISION_URL: "https://decision.example.com",
        TESSERA_ADVERTISE_URL: "http://10.1.2.3:8080",
        TESSERA_WORKER_ID: "tessera-inference-7d9f-abcde",
        TESSERA_ADMIN_TOKEN: "0123456789abcdef0123456789abcdef",
        TESSERA_INTERNAL_TOKEN: "internal-secret-0123456789",
        TESSERA_NATS_TIMEOUT_MS: "500",
        TESSERA_NATS_REPLICAS: "3",
        TESSERA_USAGE_ACK_WAIT_MS: "5000",
      },
    });
    expect(config).toMatchObject({
      accounting: { usageAckWaitMs: 5000 },
      cluster: {
        accountingUrls: ["http://tessera-accounting:8080", "http://10.0.0.7:8080"],
        registryUrls: ["http://tessera-registry:8080"],
        decisionUrls: ["https://decision.example.com"],
        advertiseUrl: "http://10.1.2.3:8080",
        workerId: "tessera-inference-7d9f-abcde",
        adminToken: "0123456789abcdef0123456789abcdef",
        internalToken: "internal-secret-0123456789",
        natsTimeoutMs: 500,
        natsReplicas: 3,
      },
    });
  });

  it("refuses bad URLs and weak tokens, naming each", () => {
    const found = problems({
      TESSERA_ACCOUNTING_URL: "http://ok:8080,accounting:8080",
      TESSERA_REGISTRY_URL: "ftp://registry",
      TESSERA_ADVERTISE_URL: "http://10.0.0.1:8080/?x=1",
      TESSERA_ADMIN_TOKEN: "short",
      TESSERA_INTERNAL_TOKEN: "has a space in it, long enough",
      TESSERA_NATS_REPLICAS: "7",
    });
    expect(found).toHaveLength(6);
    expect(found.join("\n")).toMatch(
      /TESSERA_ACCOUNTING_URL \(environment\): must be an http:\/\/ or https:\/\/ URL, got "accounting:8080"/,
    );
    expect(found.join("\n")).toMatch(/TESSERA_ADMIN_TOKEN \(environment\): must be at least 16 characters/);
    // A secret is never echoed back in an error.
    expect(found.join("\n")).not.toContain("has a space in it");
  });

  it("leaves empty values unset and shows no empty default in the help", () => {
    expect(loadConfig({ env: { TESSERA_ADMIN_TOKEN: "", TESSERA_ACCOUNTING_URL: " , " } })).toMatchObject({
      cluster: { adminToken: undefined, accountingUrls: [] },
    });
    expect(settingsHelp()).not.toContain("[default: ]");
  });
});
