import {
  Counter,
  Gauge,
  Histogram,
  Registry,
  collectDefaultMetrics,
  type CounterConfiguration,
  type GaugeConfiguration,
  type HistogramConfiguration,
  type Metric,
} from "prom-client";

/** A label set as prom-client takes it. */
export type LabelValues<L extends string> = Partial<Record<L, string | number>>;

/**
 * The metrics of one process: a registry of its own (never prom-client's global one, so
 * several servers can live in one test process) plus the HTTP metrics every process has.
 * Services add theirs with `counter`/`gauge`/`histogram`, which return the metric already
 * registered under that name instead of failing when a second instance asks again.
 */
export interface Metrics {
  readonly registry: Registry;
  /** Counted on every request: bind a child once (`labels`) and keep it. */
  readonly httpRequests: LabeledCounter<"method" | "route" | "status">;
  /** Observed on every request: bind a child once (`labels`) and keep it. */
  readonly httpDuration: LabeledHistogram<"method" | "route" | "status">;
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

export const HTTP_DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

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
    httpRequests: reuse(
      "tessera_http_requests_total",
      () =>
        new LabeledCounter(registry, {
          name: "tessera_http_requests_total",
          help: "HTTP requests answered, by method, route and status.",
          labelNames: ["method", "route", "status"] as const,
        }),
    ),
    httpDuration: reuse(
      "tessera_http_request_duration_seconds",
      () =>
        new LabeledHistogram(registry, {
          name: "tessera_http_request_duration_seconds",
          help: "Time from request to the end of the response, by method, route and status.",
          labelNames: ["method", "route", "status"] as const,
          buckets: HTTP_DURATION_BUCKETS,
        }),
    ),
    counter,
    gauge,
    histogram,
    render: () => registry.metrics(),
    contentType: registry.contentType,
  };
}

/** One exported sample, as prom-client's registry formats it. */
interface Sample {
  value: number;
  labels: Record<string, string | number>;
  metricName?: string;
  /** Histogram buckets carry one (always null here), as prom-client's do. */
  exemplar?: null;
  /** Labels printed after `labels` (prom-client's histograms put `le` first, then these). */
  sharedLabels?: Record<string, string | number>;
}

interface LabeledConfig<L extends string> {
  name: string;
  help: string;
  labelNames: readonly L[];
}

/**
 * The part shared by the two metrics below: a child per label set, made once and kept by
 * the caller, so that recording is a few additions. (prom-client's own children validate
 * and hash their labels again on every observation, which costs more than a request's
 * whole accounting on the hot path.) They register themselves in a prom-client registry
 * and export exactly what prom-client's Counter and Histogram would.
 */
abstract class LabeledMetric<L extends string, C> {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly L[];
  readonly aggregator = "sum" as const;
  protected children = new Map<string, { labels: Record<string, string | number>; child: C }>();

  constructor(registry: Registry, config: LabeledConfig<L>) {
    this.name = config.name;
    this.help = config.help;
    this.labelNames = config.labelNames;
    registry.registerMetric(this as unknown as Metric);
  }

  protected abstract makeChild(): C;

  /** The child for a label set (the same object each time for the same labels). */
  labels(labels: LabelValues<L>): C {
    let key = "";
    for (const name of this.labelNames) {
      const value = labels[name];
      key += value === undefined ? "\u0001" : `\u0002${String(value)}`;
      key += "\u0000";
    }
    let entry = this.children.get(key);
    if (entry === undefined) {
      const normalized: Record<string, string | number> = {};
      for (const name of Object.keys(labels)) {
        if (!this.labelNames.includes(name as L))
          throw new Error(`Added label "${name}" is not included in initial labelset: ${JSON.stringify(this.labelNames)}`);
      }
      for (const name of this.labelNames) {
        const value = labels[name];
        if (value !== undefined) normalized[name] = value;
      }
      entry = { labels: normalized, child: this.makeChild() };
      this.children.set(key, entry);
    }
    return entry.child;
  }

  reset(): void {
    this.children = new Map();
  }
}

export interface CounterChild {
  inc(value?: number): void;
}

class CounterValue implements CounterChild {
  value = 0;
  inc(value = 1): void {
    if (!(value >= 0) || !Number.isFinite(value)) throw new Error(`It is not possible to decrease a counter (or add ${value})`);
    this.value += value;
  }
}

/** A counter with labels, exported as prom-client's Counter would be. */
export class LabeledCounter<L extends string> extends LabeledMetric<L, CounterChild> {
  readonly type = "counter" as const;

  protected makeChild(): CounterChild {
    return new CounterValue();
  }

  async get() {
    const values: Sample[] = [];
    for (const { labels, child } of this.children.values()) values.push({ value: (child as CounterValue).value, labels });
    return { help: this.help, name: this.name, type: this.type, values, aggregator: this.aggregator };
  }
}

export interface HistogramChild {
  observe(value: number): void;
}

class HistogramValue implements HistogramChild {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(private readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length);
  }
  observe(value: number): void {
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
    const bounds = this.bounds;
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]!) {
        this.counts[i]! += 1;
        break;
      }
    }
    this.sum += value;
    this.count += 1;
  }
}

/** A histogram with labels, exported as prom-client's Histogram would be. */
export class LabeledHistogram<L extends string> extends LabeledMetric<L, HistogramChild> {
  readonly type = "histogram" as const;
  readonly buckets: readonly number[];

  constructor(registry: Registry, config: LabeledConfig<L> & { buckets: readonly number[] }) {
    super(registry, config);
    if (config.labelNames.includes("le" as L)) throw new Error("le is a reserved label keyword");
    this.buckets = [...config.buckets].sort((a, b) => a - b);
  }

  protected makeChild(): HistogramChild {
    return new HistogramValue(this.buckets);
  }

  /** Samples with the bucket's `le` first and the child's labels after it (prom-client's order). */
  async getForPromString() {
    const values: Sample[] = [];
    const bucketName = `${this.name}_bucket`;
    for (const { labels, child } of this.children.values()) {
      const value = child as HistogramValue;
      let cumulative = 0;
      this.buckets.forEach((bound, i) => {
        cumulative += value.counts[i]!;
        values.push({ value: cumulative, labels: { le: bound }, metricName: bucketName, exemplar: null, sharedLabels: labels });
      });
      values.push({ value: value.count, labels: { le: "+Inf" }, metricName: bucketName, exemplar: null, sharedLabels: labels });
      values.push({ value: value.sum, labels: {}, metricName: `${this.name}_sum`, sharedLabels: labels });
      values.push({ value: value.count, labels: {}, metricName: `${this.name}_count`, sharedLabels: labels });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  async get() {
    const data = await this.getForPromString();
    return {
      ...data,
      values: data.values.map(({ sharedLabels, labels, ...rest }) => ({ ...rest, labels: { ...labels, ...sharedLabels } })),
    };
  }
}
