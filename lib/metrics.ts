import {
  Counter,
  Gauge,
  Histogram,
  Registry,
  collectDefaultMetrics,
  type CounterConfiguration,
  type GaugeConfiguration,
  type HistogramConfiguration,
} from "prom-client";

/**
 * The metrics of one process: a registry of its own (never prom-client's global one, so
 * several servers can live in one test process) plus the HTTP metrics every process has.
 * Services add theirs with `counter`/`gauge`/`histogram`, which return the metric already
 * registered under that name instead of failing when a second instance asks again.
 */
export interface Metrics {
  readonly registry: Registry;
  readonly httpRequests: Counter<"method" | "route" | "status">;
  readonly httpDuration: Histogram<"method" | "route" | "status">;
  counter<L extends string>(config: CounterConfiguration<L>): Counter<L>;
  gauge<L extends string>(config: GaugeConfiguration<L>): Gauge<L>;
  histogram<L extends string>(config: HistogramConfiguration<L>): Histogram<L>;
  /** Prometheus text exposition format. */
  render(): Promise<string>;
  readonly contentType: string;
}

export interface MetricsOptions {
  /** Process metrics (CPU, memory, event loop lag); on by default. */
  processMetrics?: boolean;
}

export function createMetrics(options: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  if (options.processMetrics !== false) collectDefaultMetrics({ register: registry, prefix: "tessera_" });

  function reuse<M>(name: string, make: () => M): M {
    return (registry.getSingleMetric(name) as M | undefined) ?? make();
  }
  const counter = <L extends string>(config: CounterConfiguration<L>) =>
    reuse(config.name, () => new Counter<L>({ ...config, registers: [registry] }));
  const gauge = <L extends string>(config: GaugeConfiguration<L>) =>
    reuse(config.name, () => new Gauge<L>({ ...config, registers: [registry] }));
  const histogram = <L extends string>(config: HistogramConfiguration<L>) =>
    reuse(config.name, () => new Histogram<L>({ ...config, registers: [registry] }));

  return {
    registry,
    httpRequests: counter({
      name: "tessera_http_requests_total",
      help: "HTTP requests answered, by method, route and status.",
      labelNames: ["method", "route", "status"],
    }),
    httpDuration: histogram({
      name: "tessera_http_request_duration_seconds",
      help: "Time from request to the end of the response, by method, route and status.",
      labelNames: ["method", "route", "status"],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    }),
    counter,
    gauge,
    histogram,
    render: () => registry.metrics(),
    contentType: registry.contentType,
  };
}
