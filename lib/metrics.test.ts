import { Counter, Histogram, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { createMetrics, HTTP_DURATION_BUCKETS, LabeledCounter, LabeledHistogram } from "./metrics.js";

type Labels = { method: string; route: string; status: string };
const observations: [Labels, number][] = [
  [{ method: "GET", route: "/v1/models", status: "200" }, 0.0004],
  [{ method: "GET", route: "/v1/models", status: "200" }, 0.003],
  [{ method: "POST", route: "/v1/chat/completions", status: "429" }, 12],
  [{ method: "GET", route: "/v1/models", status: "200" }, 100],
  [{ method: "GET", route: "/v1/models", status: "200" }, 0.001],
];

/** The same observations through prom-client's own Counter and Histogram. */
function promClientReference(): Registry {
  const registry = new Registry();
  const counter = new Counter({ name: "c_total", help: "c", labelNames: ["method", "route", "status"], registers: [registry] });
  const histogram = new Histogram({
    name: "h_seconds",
    help: "h",
    labelNames: ["method", "route", "status"],
    buckets: HTTP_DURATION_BUCKETS,
    registers: [registry],
  });
  for (const [labels, value] of observations) {
    counter.labels(labels).inc();
    histogram.labels(labels).observe(value);
  }
  return registry;
}

function labeled(): { registry: Registry; counter: LabeledCounter<keyof Labels>; histogram: LabeledHistogram<keyof Labels> } {
  const registry = new Registry();
  const counter = new LabeledCounter(registry, { name: "c_total", help: "c", labelNames: ["method", "route", "status"] as const });
  const histogram = new LabeledHistogram(registry, {
    name: "h_seconds",
    help: "h",
    labelNames: ["method", "route", "status"] as const,
    buckets: HTTP_DURATION_BUCKETS,
  });
  for (const [labels, value] of observations) {
    counter.labels(labels).inc();
    histogram.labels(labels).observe(value);
  }
  return { registry, counter, histogram };
}

describe("LabeledCounter and LabeledHistogram", () => {
  it("export exactly what prom-client's Counter and Histogram export for the same observations", async () => {
    const reference = promClientReference();
    const { registry } = labeled();
    expect(await registry.metrics()).toBe(await reference.metrics());
    expect(await registry.getMetricsAsJSON()).toEqual(await reference.getMetricsAsJSON());
    expect(await registry.metrics()).toMatch(/^h_seconds_bucket\{le="0.001",method="GET",route="\/v1\/models",status="200"\} 2$/m);
  });

  it("give the same child for the same labels, whatever their order", () => {
    const { counter, histogram } = labeled();
    const a = counter.labels({ method: "GET", route: "/x", status: "200" });
    expect(counter.labels({ status: "200", route: "/x", method: "GET" })).toBe(a);
    expect(counter.labels({ method: "GET", route: "/x", status: "201" })).not.toBe(a);
    expect(histogram.labels({ method: "GET", route: "/x", status: "200" })).toBe(
      histogram.labels({ route: "/x", method: "GET", status: "200" }),
    );
  });

  it("refuse labels they were not made with, negative increments and values that are not numbers", () => {
    const { counter, histogram } = labeled();
    expect(() => counter.labels({ method: "GET", colour: "red" } as never)).toThrow(/colour/);
    expect(() => counter.labels({ method: "GET" }).inc(-1)).toThrow();
    expect(() => histogram.labels({ method: "GET" }).observe(Number.NaN)).toThrow(/not a valid number/);
    expect(() => new LabeledHistogram(new Registry(), { name: "x", help: "x", labelNames: ["le"], buckets: [1] })).toThrow(/reserved/);
  });

  it("start over on reset", async () => {
    const { registry } = labeled();
    registry.resetMetrics();
    expect(await registry.metrics()).toBe("# HELP c_total c\n# TYPE c_total counter\n\n# HELP h_seconds h\n# TYPE h_seconds histogram\n");
  });

  it("are the HTTP metrics of createMetrics, registered once per registry", async () => {
    const metrics = createMetrics({ processMetrics: false });
    metrics.httpRequests.labels({ method: "GET", route: "/healthz", status: 200 }).inc();
    metrics.httpDuration.labels({ method: "GET", route: "/healthz", status: 200 }).observe(0.002);
    const text = await metrics.render();
    expect(text).toMatch(/^tessera_http_requests_total\{method="GET",route="\/healthz",status="200"\} 1$/m);
    expect(text).toMatch(/^tessera_http_request_duration_seconds_bucket\{le="0.0025",method="GET",route="\/healthz",status="200"\} 1$/m);
    expect(text).toMatch(/^tessera_http_request_duration_seconds_count\{method="GET",route="\/healthz",status="200"\} 1$/m);
  });
});
