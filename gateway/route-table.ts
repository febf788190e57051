import type { ErrorStyle } from "./errors.js";
import type { MetricSeries } from "./metric-series.js";
import type { Route } from "./route.js";

/** A route as the table holds it, per method (GET and HEAD apart: the method is a metric label). */
export interface RouteEntry {
  route: Route;
  /** The route's metric series by status. */
  series: Map<number, MetricSeries>;
}

/** Routes by path, then by method; GET routes answer HEAD too. Two routes for one method and path are a bug. */
export function createRouteTable(routes: readonly Route[]): Map<string, Map<string, RouteEntry>> {
  const table = new Map<string, Map<string, RouteEntry>>();
  for (const route of routes) {
    let methods = table.get(route.path);
    if (methods === undefined) {
      methods = new Map();
      table.set(route.path, methods);
    }
    if (methods.has(route.method)) throw new Error(`two routes for ${route.method} ${route.path}`);
    methods.set(route.method, { route, series: new Map() });
    if (route.method === "GET") methods.set("HEAD", { route, series: new Map() });
  }
  return table;
}

/**
 * The table's entry for a path: an exact route, else a route whose last segment is `{id}`
 * (`/v1/models/{id}` answers `/v1/models/textmodel-26b`).
 */
export function lookupPath<T>(table: Map<string, T>, path: string): T | undefined {
  const exact = table.get(path);
  if (exact !== undefined) return exact;
  const slash = path.lastIndexOf("/");
  if (slash <= 0 || slash === path.length - 1) return undefined;
  return table.get(`${path.slice(0, slash + 1)}{id}`);
}

/** Error style of a path no route claims: chat paths answer like OpenAI, the rest like System One. */
export function styleOfPath(path: string): ErrorStyle {
  return path.startsWith("/v1/chat/") ? "openai" : "detail";
}

const KEY_IN_PATH = /tsr_[^/?#]*/g;

/** A path as logged: at most 200 characters, and anything that looks like an API key (a client that put its key in the URL) redacted. */
export function loggedPath(path: string): string {
  return (path.includes("tsr_") ? path.replace(KEY_IN_PATH, "tsr_[redacted]") : path).slice(0, 200);
}
