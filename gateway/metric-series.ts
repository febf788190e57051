import type { CounterChild, HistogramChild, Metrics } from "../lib/metrics.js";

/** A request's metrics, bound once per (method, route, status). */
export interface MetricSeries {
  requests: CounterChild;
  duration: HistogramChild;
}

/**
 * Bound metric children per (method, route, status): label lookups cost more than the
 * observation. A route keeps its own map by status (`byStatus`) so a request finds its
 * series without building a key.
 */
export function createSeriesCache(metrics: Metrics) {
  const series = new Map<string, MetricSeries>();
  const seriesOf = (method: string, route: string, status: number): MetricSeries => {
    const key = `${method} ${route} ${status}`;
    let found = series.get(key);
    if (found === undefined) {
      const labels = { method, route, status: String(status) };
      found = { requests: metrics.httpRequests.labels(labels), duration: metrics.httpDuration.labels(labels) };
      if (series.size < 1000) series.set(key, found);
    }
    return found;
  };
  return (method: string, route: string, status: number, byStatus: Map<number, MetricSeries> | undefined): MetricSeries => {
    if (byStatus === undefined) return seriesOf(method, route, status);
    let found = byStatus.get(status);
    if (found === undefined) {
      found = seriesOf(method, route, status);
      if (byStatus.size < 100) byStatus.set(status, found);
    }
    return found;
  };
}
