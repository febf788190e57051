import type { Metrics } from "../../lib/metrics.js";
import { checkReadiness, type ReadinessCheck } from "../../lib/readiness.js";
import type { Route } from "../route.js";

/** GET /healthz: the process is alive and its event loop answers. */
export function healthzRoute(): Route {
  return {
    method: "GET",
    path: "/healthz",
    errorStyle: "detail",
    body: "none",
    logLevel: "debug",
    handle: () => ({ body: { status: "ok" } }),
  };
}

/** GET /readyz: 200 when every check passes (models loaded, store reachable), else 503 naming what is not. */
export function readyzRoute(checks: readonly ReadinessCheck[]): Route {
  return {
    method: "GET",
    path: "/readyz",
    errorStyle: "detail",
    body: "none",
    logLevel: "debug",
    handle: () => checkReadiness(checks),
  };
}

/** GET /metrics: Prometheus text of this process's registry. */
export function metricsRoute(metrics: Metrics): Route {
  return {
    method: "GET",
    path: "/metrics",
    errorStyle: "detail",
    body: "none",
    logLevel: "debug",
    async handle(ctx) {
      const text = await metrics.render();
      ctx.res.writeHead(200, { "content-type": metrics.contentType, "content-length": Buffer.byteLength(text) });
      ctx.res.end(text);
      return undefined;
    },
  };
}
